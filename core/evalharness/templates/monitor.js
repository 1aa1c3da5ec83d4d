{# The monitor report's only behaviour: open the trace a #trace-… link points to (rows are
   <details>, so they open without it). #}
(function () {
  function open() {
    if (!location.hash) { return; }
    var target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (target && target.tagName === 'DETAILS') { target.open = true; }
  }
  window.addEventListener('hashchange', open);
  open();
})();
