{# report.html's only behaviour: filter the failed cases by root cause and text, expand or
   collapse them all, open the case a #case-ID link points to, and show a flaky case's failed
   repeats when its link in the repeats table is followed. Rows are <details>, so they open
   without it. #}
(function () {
  var list = document.getElementById('cases-list');
  if (!list) { return; }
  var rows = Array.prototype.slice.call(list.querySelectorAll('details.case'));
  var search = document.getElementById('case-search');
  var count = document.getElementById('case-count');
  var chips = Array.prototype.slice.call(document.querySelectorAll('.chips .chip'));
  var active = '';
  var only = '';  // a case id: its rows only (a flaky case's link), until the box is edited
  function apply() {
    var text = (search.value || '').toLowerCase().trim();
    var shown = 0;
    rows.forEach(function (row) {
      var causes = (row.getAttribute('data-causes') || '').split('|');
      var ok = (!active || causes.indexOf(active) >= 0) &&
               (only ? row.getAttribute('data-case') === only :
                (!text || (row.getAttribute('data-text') || '').indexOf(text) >= 0));
      row.hidden = !ok;
      if (ok) { shown += 1; }
    });
    count.textContent = shown + ' of ' + rows.length + ' shown';
  }
  chips.forEach(function (chip) {
    chip.addEventListener('click', function () {
      active = chip.getAttribute('data-filter') || '';
      chips.forEach(function (c) {
        var on = c === chip;
        c.classList.toggle('active', on);
        c.setAttribute('aria-pressed', on ? 'true' : 'false');
      });
      apply();
    });
  });
  search.addEventListener('input', function () { only = ''; apply(); });
  var expand = document.getElementById('expand-all');
  expand.addEventListener('click', function () {
    var open = expand.textContent === 'expand all';
    rows.forEach(function (row) { if (!row.hidden) { row.open = open; } });
    expand.textContent = open ? 'collapse all' : 'expand all';
  });
  if (location.hash && location.hash.indexOf('#case-') === 0) {
    var target = document.getElementById(location.hash.slice(1));
    if (target) { target.open = true; }
  }
  Array.prototype.slice.call(document.querySelectorAll('a.case-link')).forEach(function (a) {
    a.addEventListener('click', function () {
      only = a.getAttribute('data-case') || '';
      search.value = only;
      apply();
    });
  });
  window.addEventListener('hashchange', function () {
    var target = document.getElementById(location.hash.slice(1));
    if (target && target.tagName === 'DETAILS') { target.open = true; }
  });
  apply();
})();
