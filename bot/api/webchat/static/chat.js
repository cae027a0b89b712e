// The web chat page: its event stream, sending, Stop, approvals, files. Text from the model
// or the person is only ever set as textContent; HTML comes only from the server's dialect.
"use strict";
(function () {
  const body = document.body;
  const thread = body.dataset.thread;
  const csrf = body.dataset.csrf;
  if (!thread) return;
  const log = document.getElementById("log");
  const form = document.getElementById("composer");
  const text = document.getElementById("text");
  const send = document.getElementById("send");
  const stop = document.getElementById("stop");
  const file = document.getElementById("file");
  const attached = document.getElementById("attached");
  let live = null; // the answer streaming now
  let files = [];
  const shown = new Set(); // log ids of the lines on the page: a line is never shown twice
  const mine = {}; // nonce -> a line this page sent, until the stream says it again
  log.querySelectorAll("[data-lid]").forEach(function (d) { shown.add(d.dataset.lid); });
  log.lastElementChild && log.lastElementChild.scrollIntoView({block: "end"});

  function post(path, data) {
    return fetch(path, {method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF": csrf}, body: JSON.stringify(data)});
  }
  function bubble(kind) {
    const div = document.createElement("div");
    div.className = "msg " + kind;
    log.appendChild(div);
    div.scrollIntoView({block: "end"});
    return div;
  }
  function busy(on) { stop.hidden = !on; send.hidden = on; }

  function seen(lid, div) {
    if (!lid) return false;
    if (shown.has(String(lid))) return true;
    shown.add(String(lid));
    if (div) div.dataset.lid = lid;
    return false;
  }
  function threads(list) {
    const ul = document.querySelector("#threads ul");
    ul.textContent = "";
    list.forEach(function (t) {
      const li = document.createElement("li");
      const a = document.createElement("a");
      a.href = "/c/" + encodeURIComponent(t.thread);
      a.textContent = t.title;
      if (t.thread === thread) a.setAttribute("aria-current", "page");
      li.appendChild(a);
      ul.appendChild(li);
    });
  }

  // the stream: the browser comes back by itself (Last-Event-ID); a stream it gave up on is opened
  // again here, after the last event it had
  let last = body.dataset.after || "";
  let events = null;
  function connect() {
    events = new EventSource("/events/" + encodeURIComponent(thread) + "?after=" + encodeURIComponent(last));
    events.onmessage = heard;
    events.onerror = function () {
      if (events.readyState === EventSource.CLOSED) setTimeout(connect, 1000);
    };
  }
  function heard(e) {
    if (e.lastEventId) last = e.lastEventId;
    const item = JSON.parse(e.data);
    if (item.kind === "reload") {
      events.close();
      location.reload();
    } else if (item.kind === "threads") {
      threads(item.threads);
    } else if (item.kind === "user") {
      const pending = mine[item.nonce];
      delete mine[item.nonce];
      if (pending) { seen(item.lid, pending); return; }
      if (seen(item.lid)) return;
      const div = bubble("user");
      div.dataset.lid = item.lid;
      div.textContent = item.text;
    } else if (item.kind === "delta") {
      if (!live) live = bubble("assistant streaming");
      live.textContent += item.text;
      live.scrollIntoView({block: "end"});
    } else if (item.kind === "say") {
      if (seen(item.lid)) { if (live) live.remove(); live = null; return; }
      const div = live || bubble("assistant");
      if (item.lid) div.dataset.lid = item.lid;
      div.className = "msg assistant";
      div.innerHTML = item.html; // the dialect's HTML: escaped text in its own tags
      live = null;
    } else if (item.kind === "ask") {
      if (document.getElementById("ask-" + item.ref)) return;
      const div = bubble("ask");
      div.id = "ask-" + item.ref;
      const q = document.createElement("div");
      q.innerHTML = item.html;
      div.appendChild(q);
      const row = document.createElement("div");
      row.className = "choices";
      item.choices.forEach(function (c) {
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = c.label;
        b.addEventListener("click", function () {
          row.querySelectorAll("button").forEach(function (x) { x.disabled = true; });
          post("/press/" + encodeURIComponent(thread), {choice: c.id, ref: item.ref});
        });
        row.appendChild(b);
      });
      div.appendChild(row);
    } else if (item.kind === "closed") {
      const div = document.getElementById("ask-" + item.ref);
      if (!div) return;
      div.innerHTML = item.html;
      div.className = "msg ask closed";
    } else if (item.kind === "note") {
      bubble("note").textContent = item.text;
    } else if (item.kind === "file") {
      const div = bubble("file");
      const a = document.createElement("a");
      a.href = item.url;
      a.textContent = "⬇ " + item.name;
      a.setAttribute("download", item.name);
      div.appendChild(a);
      if (item.html) { const c = document.createElement("div"); c.innerHTML = item.html; div.appendChild(c); }
    } else if (item.kind === "end") {
      busy(false);
      if (live && item.outcome !== "completed") { live.classList.add("stopped"); live = null; }
    }
  }
  connect();

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    const said = text.value.trim();
    if (!said && !files.length) return;
    if (said === "/new") { document.getElementById("newform").submit(); return; }
    const line = bubble("user");
    line.textContent = said + (files.length ? (said ? "\n" : "") + "Attached: " + files.map(function (f) { return f.name; }).join(", ") : "");
    const nonce = Math.random().toString(36).slice(2);
    mine[nonce] = line;
    text.value = "";
    const ids = files.map(function (f) { return f.id; });
    files = [];
    attached.textContent = "";
    const command = said.charAt(0) === "/";
    if (!command) busy(true);
    post("/send/" + encodeURIComponent(thread), {text: said, files: ids, nonce: nonce}).then(function (r) {
      r.json().then(function (j) {
        if (j.go) { location.href = j.go; return; }
        if (r.ok) { if (mine[nonce]) { delete mine[nonce]; seen(j.lid, line); } return; }
        busy(false);
        bubble("note").textContent = j.error || "Not sent.";
      }, function () { busy(false); bubble("note").textContent = "Not sent."; });
    });
  });
  text.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); form.requestSubmit(); }
  });
  stop.addEventListener("click", function () { post("/stop/" + encodeURIComponent(thread), {}); });
  file.addEventListener("change", function () {
    if (!file.files.length) return;
    const data = new FormData();
    data.append("file", file.files[0]);
    fetch("/upload/" + encodeURIComponent(thread), {method: "POST", credentials: "same-origin",
      headers: {"X-CSRF": csrf}, body: data}).then(function (r) { return r.json(); }).then(function (j) {
      if (j.id) { files.push(j); attached.textContent = "Attached: " + files.map(function (f) { return f.name; }).join(", "); }
      else { bubble("note").textContent = j.error || "Not uploaded."; }
    });
    file.value = "";
  });
  document.getElementById("menu").addEventListener("click", function () {
    document.getElementById("threads").classList.toggle("open");
  });
})();
