// The live page: keeps the runs table current from the server's event stream (/live/events).
// Everything from the server goes into the page as text (textContent), never as HTML.
(function () {
  "use strict";

  var body = document.getElementById("live-runs");
  if (!body || !window.EventSource) { return; }
  var mayAct = document.body.getAttribute("data-may-act") === "yes";
  var csrfMeta = document.querySelector('meta[name="csrf-token"]');
  var csrf = csrfMeta ? csrfMeta.getAttribute("content") : "";
  var empty = document.getElementById("live-empty");
  var count = document.getElementById("live-count");
  var state = document.getElementById("live-status");
  var labels = ["Session", "Person", "Model", "Elapsed", "Now", "Queued", ""];
  var skew = 0; // server clock minus this browser's, in seconds

  function duration(seconds) {
    seconds = Math.max(0, seconds);
    if (seconds < 1) { return Math.round(seconds * 1000) + " ms"; }
    if (seconds < 10) { return seconds.toFixed(1) + " s"; }
    if (seconds < 120) { return Math.round(seconds) + " s"; }
    if (seconds < 7200) { return Math.round(seconds / 60) + " min"; }
    if (seconds < 172800) { return Math.round(seconds / 3600) + " h"; }
    return Math.round(seconds / 86400) + " days";
  }

  function now() { return Date.now() / 1000 + skew; }

  function cell(label) {
    var td = document.createElement("td");
    td.setAttribute("data-label", label);
    return td;
  }

  function span(cls, text, title) {
    var s = document.createElement("span");
    if (cls) { s.className = cls; }
    s.textContent = text;
    if (title) { s.title = title; }
    return s;
  }

  function stopForm(runId, instance) {
    var form = document.createElement("form");
    form.method = "post";
    form.action = "/live/stop";
    form.className = "inline";
    [["csrf", csrf], ["run", runId], ["instance", instance || ""]].forEach(function (pair) {
      var input = document.createElement("input");
      input.type = "hidden";
      input.name = pair[0];
      input.value = pair[1];
      form.appendChild(input);
    });
    var button = document.createElement("button");
    button.type = "submit";
    button.className = "button danger";
    button.title = "Stop this run, as /stop in its chat does";
    button.textContent = "Stop";
    form.appendChild(button);
    return form;
  }

  function activity(run) {
    if (run.tool) { return span("tool", run.tool); }
    var text = run.state === "retrying" ? "retrying the model" : run.state === "waiting" ? "waiting for a slot" : "thinking";
    return span("tool idle", text);
  }

  function newRow(run) {
    var tr = document.createElement("tr");
    tr.setAttribute("data-run", run.run_id);
    var cells = labels.map(cell);
    cells[0].appendChild(span("", run.label, run.session));
    if (run.instance) {
      cells[0].appendChild(document.createElement("br"));
      var on = document.createElement("small");
      on.textContent = "on " + run.instance;
      cells[0].appendChild(on);
    }
    cells[1].appendChild(document.createTextNode(run.person));
    cells[1].appendChild(document.createElement("br"));
    var where = document.createElement("small");
    where.textContent = run.where;
    cells[1].appendChild(where);
    cells[2].textContent = run.model;
    cells[3].appendChild(span("elapsed", ""));
    if (mayAct) { cells[6].appendChild(stopForm(run.run_id, run.instance)); }
    cells.forEach(function (td) { tr.appendChild(td); });
    return tr;
  }

  function update(tr, run) {
    tr.setAttribute("data-started", String(run.started_at));
    tr.children[4].replaceChildren(activity(run));
    tr.children[5].textContent = run.queued ? String(run.queued) : "—";
    tick(tr);
  }

  function tick(tr) {
    var started = parseFloat(tr.getAttribute("data-started"));
    var elapsed = tr.querySelector(".elapsed");
    if (elapsed && !isNaN(started)) { elapsed.textContent = duration(now() - started); }
  }

  function showRuns(data) {
    skew = data.now - Date.now() / 1000;
    var existing = {};
    Array.prototype.forEach.call(body.rows, function (tr) { existing[tr.getAttribute("data-run")] = tr; });
    var rows = data.runs.map(function (run) {
      var tr = existing[run.run_id] || newRow(run);
      delete existing[run.run_id];
      update(tr, run);
      return tr;
    });
    Object.keys(existing).forEach(function (id) { existing[id].remove(); });
    rows.forEach(function (tr) { body.appendChild(tr); }); // in order of start; kept rows move, not rebuilt
    empty.hidden = rows.length > 0;
    count.textContent = rows.length + (rows.length === 1 ? " run" : " runs") + " in flight";
  }

  var kinds = {"running": "ok", "stopped": "muted", "failed": "bad", "sending fails": "warn", "failure notice": "warn"};

  function fill(id, rows, labelsOf, badgeColumn) {
    var tbody = document.getElementById(id);
    if (!tbody || !rows) { return; }
    var table = tbody.closest(".table-wrap");
    var none = table ? table.nextElementSibling : null;
    tbody.replaceChildren.apply(tbody, rows.map(function (values) {
      var tr = document.createElement("tr");
      values.forEach(function (value, i) {
        var td = cell(labelsOf[i]);
        if (i === badgeColumn && kinds[value]) {
          td.appendChild(span("badge " + kinds[value], value));
        } else {
          td.textContent = value;
        }
        tr.appendChild(td);
      });
      return tr;
    }));
    if (none && none.classList.contains("empty")) { none.hidden = rows.length > 0; }
  }

  function showStatus(data) {
    fill("live-channels", data.channels, ["Channel", "State", "Detail"], 1);
    fill("live-owed", data.owed, ["Platform", "Chat", "Parts sent", "Waiting", "Kind"], 4);
  }

  function connected(on) {
    state.textContent = on ? "live" : "reconnecting…";
    state.className = on ? "dot on" : "dot off";
  }

  var source = new EventSource("/live/events");
  source.addEventListener("runs", function (e) { showRuns(JSON.parse(e.data)); });
  source.addEventListener("status", function (e) { showStatus(JSON.parse(e.data)); });
  source.onopen = function () { connected(true); };
  source.onerror = function () { connected(false); };
  window.setInterval(function () { Array.prototype.forEach.call(body.rows, tick); }, 1000);
})();
