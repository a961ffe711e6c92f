// edge-mcp console: live updates over server-sent events. Progressive
// enhancement only: every page reads the same without it. Text from the
// gateway is set with textContent, never parsed as HTML.
(function () {
  "use strict";
  var live = document.querySelector("[data-stream]");
  if (!live || !window.EventSource) return;
  var rows = document.getElementById("tail");
  var chart = document.getElementById("chart");
  var es = new EventSource(live.getAttribute("data-stream"));
  es.onopen = function () { live.textContent = "Live: new entries appear at the top."; };
  es.onerror = function () { live.textContent = "Reconnecting…"; };
  es.addEventListener("entry", function (ev) {
    if (!rows) return;
    var e = JSON.parse(ev.data);
    var tr = document.createElement("tr");
    tr.className = "kind-" + e.kind;
    [String(e.time).slice(11, 19), e.kind, e.identity, e.server, e.tool, e.outcome, e.ms ? e.ms + " ms" : "", e.text].forEach(function (v) {
      var td = document.createElement("td");
      td.textContent = v || "";
      tr.appendChild(td);
    });
    rows.insertBefore(tr, rows.firstChild);
    while (rows.rows.length > 500) rows.deleteRow(-1);
  });
  es.addEventListener("tick", function (ev) {
    if (!chart) return;
    var t = JSON.parse(ev.data);
    chart.src = chart.getAttribute("data-src") + "?t=" + Date.now();
    var now = document.getElementById("rate-now");
    if (now) now.textContent = t.calls + " calls, " + t.errors + " errors in the last second";
  });
})();
