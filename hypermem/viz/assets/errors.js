(function () {
  "use strict";
  var pending = [];
  function report(msg) {
    var root = document.documentElement;
    root.setAttribute("data-errors", String(Number(root.getAttribute("data-errors") || "0") + 1));
    var el = document.getElementById("hm-errors");
    if (el) { el.hidden = false; el.textContent += String(msg) + "\n"; } else { pending.push(String(msg)); }
  }
  window.hmReport = report;
  window.hmPendingErrors = pending;
  window.addEventListener("error", function (e) {
    report("error: " + (e.message || e.type) + (e.lineno ? " (line " + e.lineno + ")" : ""));
  }, true);
  window.addEventListener("unhandledrejection", function (e) { report("unhandled rejection: " + e.reason); });
  document.addEventListener("securitypolicyviolation", function (e) {
    report("blocked by the content security policy: " + e.violatedDirective);
  });
})();
