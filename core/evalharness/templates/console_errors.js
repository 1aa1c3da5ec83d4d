{# Inlined first by base.html: collects window.onerror, console.error, unhandled rejections
   and CSP violations into <pre id="console-errors">, so a headless browser test can
   assert a page ran cleanly. Adds the class "js" to <html> (CSS shows script-only parts). #}
(function () {
  var pending = [];
  function put(message) {
    var box = document.getElementById('console-errors');
    if (box) { box.textContent += message + '\n'; } else { pending.push(message); }
  }
  window.onerror = function (message, source, line) {
    put('error: ' + message + ' (line ' + line + ')');
  };
  window.addEventListener('unhandledrejection', function (event) {
    put('unhandled rejection: ' + event.reason);
  });
  document.addEventListener('securitypolicyviolation', function (event) {
    put('blocked by the content security policy: ' + event.blockedURI);
  });
  var original = console.error;
  console.error = function () {
    put('console.error: ' + Array.prototype.join.call(arguments, ' '));
    return original.apply(console, arguments);
  };
  document.addEventListener('DOMContentLoaded', function () {
    var box = document.getElementById('console-errors');
    if (box && pending.length) { box.textContent += pending.join('\n') + '\n'; }
    pending = [];
  });
  document.documentElement.className += ' js';
})();
