"""An agent's household notes, organised by a hierarchy encoder: no note declares a parent.

A home assistant keeps about 300 short notes: kinds of things (``appliance``, ``tool``...),
the things of this house (``the dishwasher``, ``the cordless drill``...) and what it learned
about them (``the dishwasher filter needs rinsing every month``).  They are written for this
example, and they come with **no** ``parent=``: each one is stored with ``parent="auto"``, and
the store's hierarchy encoder puts it under the memory it scores as its most likely parent
(when that score passes the threshold chosen on the encoder's validation data) or, once the
note's nearest memories have been placed, under the parent their vote prefers among those
that pass it (docs/store.md, "A filed store votes"), keeping the choice and the runners-up in
the note's ``meta["auto_parent"]``.  Then the agent asks which
stored memories subsume a new, unfiled text (``search(text, mode="ancestors")``, no root),
saves the store (the encoder is recorded, a different one is refused), and writes the
inspector page, where each auto-placed note shows its suggested parents.

The example knows which kind each thing is (the agent does not tell the store), so it can say
how many things landed under their own kind and how many notes under their own thing, or its
kind.

Run: ``python examples/household_notes.py --encoder FOLDER [--dir DIR]``, where ``FOLDER`` is
a hierarchy encoder trained on WordNet nouns (``hypermem train --config wordnet_encoder``, or
``benchmarks/bench_encoder.py``; see docs/encoder.md and docs/store.md).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from hypermem import Memory
from hypermem.embed import HierarchyEncoder

# A kind, then its things indented, each "thing: note | note | ..." (a thing may take two lines).
HOUSEHOLD_TEXT = """
appliance
    the dishwasher: the dishwasher filter needs rinsing every month
    the dishwasher: the dishwasher runs best on the eco cycle | dishwasher tablets are under the sink
    the refrigerator: the refrigerator door seal is loose | the fridge water filter was changed in March
    the refrigerator: the fridge light flickers
    the washing machine: the washing machine drum needs a hot clean | the washer leaks on the spin cycle
    the washing machine: the washing machine warranty ends next year
    the oven: the oven takes ten minutes to preheat | the oven door glass is cracked
    the oven: the oven light bulb is a 25 watt one
    the microwave: the microwave has a grill setting | the microwave turntable squeaks
    the microwave: the microwave clock resets after power cuts
    the toaster: the toaster has a bagel button | the toaster burns the left slot
    the toaster: the toaster crumb tray is full
    the vacuum cleaner: the vacuum cleaner bags are in the hall cupboard
    the vacuum cleaner: the vacuum brush roll is tangled with hair | the vacuum battery lasts twenty minutes
    the kettle: the kettle holds one and a half litres | the kettle needs descaling
    the kettle: the kettle switch sticks
    the freezer: the freezer door alarm beeps after a minute | the freezer needs defrosting
    the freezer: the freezer holds the spare ice packs
furniture
    the sofa: the sofa cushions are washable | the sofa has a wobbly leg | a coin is stuck in the sofa
    the bed: the bed frame creaks | the mattress was turned in January | spare sheets are under the bed
    the wardrobe: the wardrobe mirror has a chip | the wardrobe door hinge is loose
    the wardrobe: winter coats hang in the wardrobe
    the bookcase: the cookbooks are on the bottom shelf | the bookcase is screwed to the wall
    the bookcase: the top shelf of the bookcase sags
    the desk: the desk chair wheel is broken | the desk drawer key is taped under the desk
    the desk: the desk lamp needs a new bulb
    the dining table: the dining table chairs need new pads | the dining table extends to seat eight
    the dining table: the dining table has a water stain
    the armchair: the armchair came from grandma | the armchair recliner is stiff
    the armchair: the armchair cover is in the wash
tool
    the hammer: the rubber mallet is next to the hammer | the hammer is in the red toolbox
    the hammer: the claw hammer handle is cracked
    the screwdriver: the screwdriver bits are in the drawer
    the screwdriver: the screwdriver set is missing the small flat one
    the screwdriver: the electric screwdriver needs charging
    the cordless drill: the drill batteries are in the garage | the drill bits for masonry are blue
    the cordless drill: the drill chuck is stiff
    the saw: the jigsaw blades are in a tin | the saw blade is dull | the hand saw hangs on the garage wall
    the wrench: the socket wrench set is complete | the adjustable wrench is in the car boot
    the wrench: the pipe wrench fits the sink trap
    the ladder: the step ladder is in the utility room | the ladder has a loose rung
    the ladder: the ladder is behind the shed
    the pliers: the pliers cut wire too | the pliers are in the kitchen drawer
    the pliers: the needle nose pliers are rusty
plant
    the fern: the fern is repotted every spring | the fern likes the bathroom humidity
    the fern: the fern fronds are turning brown
    the basil: the basil seeds are in the shed | the basil needs pinching back
    the basil: the basil pot is on the kitchen windowsill
    the tomato plant: the tomato plant needs a taller cane | the tomato plant has yellow leaves
    the tomato plant: the tomatoes ripen in August
    the rose bush: the rose bush blooms in June | the rose bush needs pruning in February
    the rose bush: the rose bush has aphids
    the cactus: the cactus spines caught the curtain | the cactus is watered once a month
    the cactus: the cactus flowered last spring
    the orchid: the orchid is on the north window | the orchid gets a drop of feed weekly
    the orchid: the orchid roots are poking out of the pot
    the lemon tree: the lemon tree gave six lemons this year | the lemon tree comes inside in October
    the lemon tree: the lemon tree has scale insects
food
    the bread: the sourdough starter is fed on Mondays | the bread goes stale in two days
    the bread: the bread maker needs a new paddle
    the cheese: the cheddar is for the sandwiches | the cheese is wrapped in wax paper
    the cheese: the blue cheese is for the weekend
    the rice: the basmati rice is for Friday curry | the rice is in the glass jar
    the rice: the rice cooker needs a new seal
    the pasta: the pasta maker is in the top cupboard | the pasta shelf is almost empty
    the pasta: the gluten free pasta is for the guests
    the coffee: the decaf is for the evenings | the coffee beans are in the freezer
    the coffee: the coffee grinder is set to fine
    the eggs: the eggs are kept out of the fridge | the eggs are from the farm shop
    the eggs: the eggs expire on Friday
    the apples: the apple tree needs netting | the apples are in the cold store
    the apples: the apples are for the crumble
    the soup: the soup recipe is on the fridge door | the soup in the freezer is leek and potato
    the soup: the soup pot is in the dishwasher
vehicle
    the car: the car is due for a service in May | the car tyre pressure is low
    the car: the car spare key is in the study
    the bicycle: the bicycle chain needs oil | the bicycle lock code is in the notebook
    the bicycle: the bicycle back tyre has a slow puncture
    the scooter: the scooter folds into the boot | the scooter charger is in the hall
    the scooter: the scooter brake is squeaky
    the van: the van needs diesel | the van is borrowed on Saturdays | the van roof rack is in the garage
document
    the passport: the passport photo is out of date | the passport expires in 2028
    the passport: the passport is in the safe
    the insurance policy: the insurance excess is two hundred pounds
    the insurance policy: the home insurance policy renews in June
    the insurance policy: the insurance policy number is in the file
    the tax return: the accountant has the tax return copy | the tax return is due in January
    the tax return: the tax receipts are in the blue folder
    the warranty: the boiler warranty needs a yearly service
    the warranty: the fridge warranty card is in the kitchen drawer
    the warranty: the laptop warranty covers accidental damage
    the lease: the lease deposit is with the agency | the lease ends in September | the lease allows one pet
    the birth certificate: the birth certificate is needed for the school form
    the birth certificate: the birth certificates are in the safe
    the birth certificate: a copy of the birth certificate is in the file
garment
    the raincoat: the raincoat is reproofed each autumn | the raincoat hangs by the back door
    the raincoat: the raincoat zip is broken
    the boots: the boots are drying by the radiator | the hiking boots need new laces
    the boots: the rain boots are in the porch
    the sweater: the sweater was a birthday present | the wool sweater needs a hand wash
    the sweater: the sweater has a moth hole
    the school uniform: the spare school shirts are ironed | the school uniform needs name labels
    the school uniform: the uniform jumper is too small
    the scarf: the striped scarf is the team colours | the scarf was left at the cafe
    the scarf: the silk scarf is dry clean only
animal
    the cat: the cat has a vet appointment on Tuesday | the cat food is in the pantry
    the cat: the cat flap battery is low
    the dog: the dog is walked at seven | the dog's flea treatment is due | the dog lead is by the door
    the goldfish: the goldfish is called Bubbles | the goldfish tank filter needs cleaning
    the goldfish: the goldfish is fed twice a day
    the rabbit: the rabbit's nails need clipping | the rabbit hutch needs fresh straw
    the rabbit: the rabbit likes carrot tops
    the parrot: the parrot food is sunflower seeds | the parrot says hello to visitors
    the parrot: the parrot cage is cleaned on Sundays
medicine
    the aspirin: the aspirin is not for the children | the aspirin is in the bathroom cabinet
    the aspirin: the aspirin expires next month
    the antibiotic: the antibiotic is kept in the fridge | the antibiotic course ends on Thursday
    the antibiotic: the antibiotic is taken with food
    the vitamin: the vitamin C tablets fizz | the vitamin D is taken in winter
    the vitamin: the children's vitamins are gummies
    the cough syrup: the cough syrup measuring cup is missing | the cough syrup is for night time
    the cough syrup: the cough syrup bottle is sticky
    the inhaler: the inhaler is used before football | the spare inhaler is in the car
    the inhaler: the inhaler prescription needs renewing
container
    the toolbox: the small toolbox is in the kitchen | the red toolbox lid is cracked
    the toolbox: the toolbox lives in the garage
    the suitcase: the suitcase key is on the hook | the big suitcase is in the loft
    the suitcase: the suitcase wheel is broken
    the basket: the log basket is by the fire | the laundry basket is by the stairs
    the basket: the picnic basket has plates inside
    the jar: the jar lids are in a bag | the jam jars are saved for the summer
    the jar: the cookie jar is on the top shelf
    the bin: the garden waste bin is collected every other week | the recycling bin goes out on Wednesday
    the bin: the compost bin is full
device
    the laptop: the laptop battery drains fast | the laptop password hint is the cat's name
    the laptop: the laptop charger is behind the desk
    the router: the router lights blink when offline | the router restarts at three in the morning
    the router: the router password is on its sticker
    the printer: the printer scans to email | the printer is out of black ink
    the printer: the printer jams on thick paper
    the television: the television subscription renews in July | the television remote needs new batteries
    the television: the television is on the living room wall
    the phone: the phone case is cracked | the old phone is in the drawer for recycling
    the phone: the phone charger cable is frayed
    the thermostat: the thermostat battery is a double A | the thermostat is set to nineteen degrees
    the thermostat: the thermostat schedule skips weekends
    the smoke alarm: the smoke alarm in the kitchen goes off with toast | the smoke alarm in the hall chirps
    the smoke alarm: the smoke alarms were tested in October
"""


def fmt(x: float | None) -> str:
    """A score as the example prints it: three decimals, or "none" (the vote has no threshold)."""
    return "none" if x is None else f"{x:.3f}"


def parse(text: str) -> dict[str, dict[str, list[str]]]:
    """``{kind: {thing: [notes]}}`` of :data:`HOUSEHOLD_TEXT`."""
    out: dict[str, dict[str, list[str]]] = {}
    kind = None
    for line in text.strip().splitlines():
        if not line.startswith(" "):
            kind = line.strip()
            out[kind] = {}
            continue
        thing, _, notes = line.strip().partition(": ")
        out[kind].setdefault(thing, []).extend(n.strip() for n in notes.split(" | "))
    return out


HOUSEHOLD = parse(HOUSEHOLD_TEXT)
UNFILED = ["the blender blade is dull", "the garden shears need sharpening", "the hamster escaped again",
           "the car insurance renews in April"]
"""Texts the agent asks about, not stored: which stored memories subsume them?"""


def notes() -> list[tuple[str, str | None, str | None]]:
    """Every text with the kind and thing it is about (what the example knows, the store does not),
    kinds first, then things, then notes: the order an agent that files as it goes would meet them."""
    kinds = [(k, None, None) for k in HOUSEHOLD]
    things = [(t, k, None) for k, ts in HOUSEHOLD.items() for t in ts]
    about = [(n, k, t) for k, ts in HOUSEHOLD.items() for t, ns in ts.items() for n in ns]
    return kinds + things + about


def run(encoder: str, folder: Path) -> None:
    enc = HierarchyEncoder.load(encoder)
    mem = Memory(embedder=enc)
    print(f"store -> {mem!r}")
    texts = notes()
    ids = mem.add_many([{"text": text, "parent": "auto", "meta": {"label": text.removeprefix("the ")}}
                        for text, _, _ in texts])
    text_of = {i: t for i, (t, _, _) in zip(ids, texts)}
    kind_of = {t: k for t, k, _ in texts}
    placed = sum(mem.parent(i) is not None for i in ids)
    print(f"notes -> {len(ids)}")
    print(f"placed under a memory -> {placed}")
    things = [(i, k) for i, (_, k, t) in zip(ids, texts) if k is not None and t is None]
    under_kind = sum(text_of.get(mem.parent(i)) == k for i, k in things)
    print(f"things under their own kind -> {under_kind} of {len(things)}")
    about = [(i, k, t) for i, (_, k, t) in zip(ids, texts) if t is not None]
    under_thing = sum(text_of.get(mem.parent(i)) in (t, k) for i, k, t in about)
    print(f"notes under their own thing or its kind -> {under_thing} of {len(about)}")
    dish = ids[[t for t, _, _ in texts].index("the dishwasher filter needs rinsing every month")]
    why = mem.get(dish).meta["auto_parent"]
    print(f"why the dishwasher filter note sits where it does -> parent {text_of.get(why['parent'])!r}, "
          f"score {why['score']:.3f} vs threshold {fmt(why['threshold'])}, suggested "
          f"{[text_of[s['id']] for s in why['suggested']]}")
    for q in UNFILED:
        got = [h.text for h in mem.search(q, k=3, mode="ancestors")]
        kinds = [kind_of.get(t) or t for t in got]
        print(f"ancestors of {q!r} -> {' | '.join(got)}  (kinds: {', '.join(kinds)})")
    path = folder / "household.db"
    mem.save(path)
    back = Memory.load(path, embedder=enc)
    print(f"reloaded with its encoder -> {len(back)} memories, {back.metric} metric")
    try:
        Memory.load(path)
    except ValueError as exc:
        print(f"reloaded without it -> refused: {str(exc)[:90]}...")
    page = folder / "household.html"
    mem.inspect(page, title="An agent's household notes, placed by a hierarchy encoder")
    print(f"inspector -> {page}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--encoder", required=True, help="the folder of a hierarchy encoder trained on WordNet nouns")
    p.add_argument("--dir", help="where the store and the page go (default: a temporary folder)")
    args = p.parse_args(argv)
    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="hypermem-household-"))
    folder.mkdir(parents=True, exist_ok=True)
    run(args.encoder, folder)


if __name__ == "__main__":
    main()
