// Installed before plotly.js so that any error, even while loading it, is shown on the page
// (and found by the headless-browser test).
window.__reportErrors = [];
function reportError(msg) {
  window.__reportErrors.push(String(msg));
  var el = document.getElementById('js-errors');
  if (el) { el.textContent = window.__reportErrors.join('\n'); el.style.display = 'block'; }
}
window.onerror = function (msg, src, line, col) { reportError(msg + ' (' + src + ':' + line + ':' + col + ')'); };
window.addEventListener('unhandledrejection', function (e) { reportError('unhandled rejection: ' + e.reason); });
document.addEventListener('DOMContentLoaded', function () { if (window.__reportErrors.length) reportError(''); });
