// The review page: labels are sent as they are given (POST /label) and the server appends
// them to review/labels.jsonl before it answers, so closing the tab loses nothing.
(function () {
  "use strict";
  var root = document.getElementById("review");
  var token = root.dataset.token;
  var caseId = root.dataset.case;
  var targets = Array.prototype.slice.call(document.querySelectorAll(".target"));
  var status = document.getElementById("status");
  var focused = 0;
{% include "review_nav.js" %}

  function focus(i) {
    if (!targets.length) { return; }
    focused = Math.max(0, Math.min(targets.length - 1, i));
    targets.forEach(function (t, k) { t.classList.toggle("focused", k === focused); });
    targets[focused].focus({preventScroll: true});
    targets[focused].scrollIntoView({block: "nearest"});
  }

  function show(t, label) {
    t.dataset.label = label === null ? "" : String(label);
    t.classList.toggle("labelled", label !== null);
    t.querySelectorAll("button[data-value]").forEach(function (b) {
      b.classList.toggle("chosen", label !== null && b.dataset.value === String(label));
    });
    t.querySelector(".saved").textContent = label === null ? "taken back" : "saved: " + label;
  }

  function send(t, value) {
    if (!reviewer()) {
      status.textContent = "type your name first (top right)";
      nameBox.focus();
      return Promise.resolve(false);
    }
    var correction = t.querySelector(".correction");
    var body = {
      case: caseId, component: t.dataset.component, metric: t.dataset.metric,
      item: t.dataset.item, label: value === "" ? null : value, reviewer: reviewer(),
      note: t.querySelector(".note").value,
      correction: correction && correction.value.trim() ? correction.value : null
    };
    return fetch("/label", {
      method: "POST", headers: {"Content-Type": "application/json", "X-Review-Token": token},
      body: JSON.stringify(body)
    }).then(function (r) {
      return r.json().then(function (data) {
        if (!r.ok) { throw new Error(data.error || r.statusText); }
        show(t, data.label);
        status.textContent = "saved " + t.dataset.component + "." + t.dataset.metric +
          (t.dataset.item ? " " + t.dataset.item : "") + ": " + (data.label === null ? "taken back" : data.label) +
          (data.warnings ? " — " + data.warnings.join("; ") : "");
        return true;
      });
    }).catch(function (err) {
      status.textContent = "not saved: " + err.message;
      console.warn(err);
      return false;
    });
  }

  // Labels go out one at a time, in the order they were given, so the log on disk ends with
  // the last one; the focus moves on at once, so quick typing labels consecutive targets.
  var queue = Promise.resolve();

  function label(value) {
    var t = targets[focused];
    if (!t) { return; }
    var allowed = Array.prototype.some.call(t.querySelectorAll("button[data-value]"),
      function (b) { return b.dataset.value === value; });
    if (!allowed) { status.textContent = "'" + value + "' does not apply here"; return; }
    if (!reviewer()) { send(t, value); return; }
    var given = /^[1-5]$/.test(value) ? Number(value) : value;
    var before = t.dataset.label;
    show(t, given === "" ? null : given);  // at once; put back if the server refuses it
    t.querySelector(".saved").textContent = "saving…";
    queue = queue.then(function () {
      return send(t, given).then(function (ok) {
        if (!ok) {
          show(t, before === "" ? null : (/^[1-5]$/.test(before) ? Number(before) : before));
          t.querySelector(".saved").textContent = "not saved";
        }
        return ok;
      });
    });
    if (value !== "") { focus(focused + 1); }
  }

  targets.forEach(function (t, k) {
    var current = t.dataset.label;
    if (current) { show(t, /^[1-5]$/.test(current) ? Number(current) : current); }
    t.addEventListener("click", function () { focus(k); });
    t.querySelectorAll("button[data-value]").forEach(function (b) {
      b.addEventListener("click", function (ev) {
        ev.stopPropagation();
        focus(k);
        label(b.dataset.value);
      });
    });
    t.querySelectorAll("input").forEach(function (box) {
      box.addEventListener("change", function () {
        if (t.dataset.label) {
          var given = /^[1-5]$/.test(t.dataset.label) ? Number(t.dataset.label) : t.dataset.label;
          queue = queue.then(function () { return send(t, given); });
        }
      });
    });
  });

  nameBox.addEventListener("change", function () { go(root.dataset.index); });

  var keys = {y: "yes", n: "no", a: "agree", d: "disagree", u: "",
              "1": "1", "2": "2", "3": "3", "4": "4", "5": "5"};
  document.addEventListener("keydown", function (ev) {
    var tag = (ev.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "textarea") {
      if (ev.key === "Escape" || ev.key === "Enter") { ev.target.blur(); focus(focused); }
      return;
    }
    if (ev.ctrlKey || ev.metaKey || ev.altKey) { return; }
    if (Object.prototype.hasOwnProperty.call(keys, ev.key)) { label(keys[ev.key]); }
    else if (ev.key === "j" || ev.key === "ArrowDown") { focus(focused + 1); }
    else if (ev.key === "k" || ev.key === "ArrowUp") { focus(focused - 1); }
    else if (ev.key === "ArrowRight" || ev.key === "l") { go(root.dataset.next); }
    else if (ev.key === "ArrowLeft" || ev.key === "h") { go(root.dataset.prev); }
    else if (ev.key === "e" && targets[focused]) { targets[focused].querySelector(".note").focus(); }
    else if (ev.key === "?") { var h = document.getElementById("help"); h.hidden = !h.hidden; }
    else { return; }
    ev.preventDefault();
  });

  var first = targets.findIndex(function (t) { return !t.dataset.label; });
  focus(first < 0 ? 0 : first);
})();
