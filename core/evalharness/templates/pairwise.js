// The pairwise page: a preference is sent as "left", "right" or "tie"; the server alone knows
// which run is on which side and stores the preference by run.
(function () {
  "use strict";
  var root = document.getElementById("review");
  var note = document.getElementById("note");
  var status = document.getElementById("status");
{% include "review_nav.js" %}

  function show(choice) {
    root.dataset.choice = choice || "";
    document.querySelectorAll("button[data-choice]").forEach(function (b) {
      b.classList.toggle("chosen", !!choice && b.dataset.choice === choice);
    });
    document.querySelectorAll(".side").forEach(function (s) {
      s.classList.toggle("preferred", choice === s.dataset.side || choice === "tie");
    });
  }

  var queue = Promise.resolve();  // one choice at a time, in the order given

  function choose(choice) {
    if (!reviewer()) { status.textContent = "type your name first (top right)"; nameBox.focus(); return; }
    queue = queue.then(function () { return post(choice); });
  }

  function post(choice) {
    return fetch("/label", {
      method: "POST",
      headers: {"Content-Type": "application/json", "X-Review-Token": root.dataset.token},
      body: JSON.stringify({case: root.dataset.case, choice: choice || null,
                            reviewer: reviewer(), note: note.value})
    }).then(function (r) {
      return r.json().then(function (data) {
        if (!r.ok) { throw new Error(data.error || r.statusText); }
        show(data.choice);
        status.textContent = (data.choice ? "saved: " + data.choice : "taken back") +
          (data.warnings ? " (the file's torn last line was moved aside; see the server's log)" : "");
      });
    }).catch(function (err) { status.textContent = "not saved: " + err.message; console.warn(err); });
  }

  document.querySelectorAll("button[data-choice]").forEach(function (b) {
    b.addEventListener("click", function () { choose(b.dataset.choice); });
  });
  note.addEventListener("change", function () { if (root.dataset.choice) { choose(root.dataset.choice); } });
  nameBox.addEventListener("change", function () { go(root.dataset.index); });

  var keys = {"1": "left", "2": "right", t: "tie", "=": "tie", u: ""};
  document.addEventListener("keydown", function (ev) {
    var tag = (ev.target.tagName || "").toLowerCase();
    if (tag === "input") {
      if (ev.key === "Escape" || ev.key === "Enter") { ev.target.blur(); }
      return;
    }
    if (ev.ctrlKey || ev.metaKey || ev.altKey) { return; }
    if (Object.prototype.hasOwnProperty.call(keys, ev.key)) { choose(keys[ev.key]); }
    else if (ev.key === "ArrowRight" || ev.key === "l") { go(root.dataset.next); }
    else if (ev.key === "ArrowLeft" || ev.key === "h") { go(root.dataset.prev); }
    else if (ev.key === "e") { note.focus(); }
    else if (ev.key === "?") { var h = document.getElementById("help"); h.hidden = !h.hidden; }
    else { return; }
    ev.preventDefault();
  });
  show(root.dataset.choice);
})();
