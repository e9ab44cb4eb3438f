/**
 * The status page's HTML, script and style (status-page.ts), as written: no build step, no
 * framework, nothing loaded from elsewhere, no inline script or style (the CSP forbids both).
 * Data is put in the page with `textContent` only, never as markup.
 *
 * The script reads a bearer token from `#token=…` (the fragment never reaches a server or a
 * log; it is moved to `sessionStorage` and dropped from the address bar) or from the token
 * form shown after a 401, and sends it on every request. It loads `/api/v1/status`, reads
 * `/api/v1/events` as a stream (a `fetch`, since `EventSource` cannot send a header) and adds
 * each call record at the top as it arrives, reloading the snapshot (breakers, upstreams) at
 * most once a second after one, and every 5 s. An operator approves or rejects a parked call
 * with the buttons beside it (`POST /api/v1/approvals/:id`).
 */

export const STATUS_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mcp-broker status</title>
<link rel="stylesheet" href="/status/app.css">
<script src="/status/app.js" defer></script>
</head>
<body>
<header>
  <h1>mcp-broker <span id="version"></span></h1>
  <p id="meta"><span id="viewer"></span> · protocol <span id="eras"></span> · <span id="live">connecting…</span></p>
</header>
<form id="login" hidden>
  <label>Bearer token <input id="token" type="password" autocomplete="off"></label>
  <button type="submit">Show</button>
  <span id="login-error"></span>
</form>
<main>
  <section><h2>Upstreams</h2>
    <table id="upstreams"><thead><tr><th>upstream</th><th>kind</th><th>state</th><th>last error</th></tr></thead><tbody></tbody></table>
  </section>
  <section><h2>Open breakers</h2><ul id="breakers"></ul></section>
  <section><h2>Pending approvals</h2><ul id="approvals"></ul></section>
  <section><h2>Recent calls</h2>
    <table id="calls"><thead><tr><th>time</th><th>tool</th><th>principal</th><th>outcome</th><th>ms</th><th>attempts</th><th>reason</th></tr></thead><tbody></tbody></table>
  </section>
  <section><h2>Roster</h2>
    <table id="tools"><thead><tr><th>tool</th><th>upstream</th><th>policy</th><th>pin</th></tr></thead><tbody></tbody></table>
  </section>
</main>
</body>
</html>
`;

export const STATUS_CSS = `:root { color-scheme: light dark; font-family: system-ui, sans-serif; font-size: 14px; }
body { margin: 1.5rem; }
h1 { font-size: 1.4rem; margin: 0; }
h1 span { font-weight: normal; opacity: .7; }
h2 { font-size: 1.05rem; margin: 1.5rem 0 .4rem; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .25rem .6rem; border-bottom: 1px solid #8884; vertical-align: top; }
td.reason, td.error { font-family: ui-monospace, monospace; font-size: .85rem; word-break: break-word; }
.state-ready, .outcome-ok { color: #1a7f37; }
.state-failed, .state-backoff, .outcome-upstream_error, .outcome-timeout, .outcome-breaker_open, .outcome-guard_error { color: #cf222e; font-weight: 600; }
.outcome-denied, .outcome-approval_required, .outcome-withheld, .outcome-budget_exhausted, .outcome-tool_error { color: #9a6700; }
#live.on { color: #1a7f37; }
#live.off { color: #cf222e; }
#breakers li { color: #cf222e; font-weight: 600; }
#approvals button { margin-left: .4rem; }
tr.fresh { animation: fresh 2s ease-out; }
@keyframes fresh { from { background: #ffd33d66; } to { background: transparent; } }
form { margin: 1rem 0; }
`;

export const STATUS_JS = `'use strict';
(function () {
  var KEY = 'mcp-broker-token';
  var token = sessionStorage.getItem(KEY) || '';
  var match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (match) {
    // A token pasted as it is may hold a % that is no escape: taken as it came, not a URIError that stops the page.
    try { token = decodeURIComponent(match[1]); } catch (e) { token = match[1]; }
    sessionStorage.setItem(KEY, token);
    history.replaceState(null, '', location.pathname + location.search);
  }
  var seen = {};
  var reloadTimer = null;

  function $(id) { return document.getElementById(id); }
  function headers() { return token ? { Authorization: 'Bearer ' + token } : {}; }
  function cell(text, cls) {
    var td = document.createElement('td');
    td.textContent = text === undefined || text === null ? '' : String(text);
    if (cls) td.className = cls;
    return td;
  }
  function row(cells, attrs) {
    var tr = document.createElement('tr');
    cells.forEach(function (c) { tr.appendChild(c); });
    Object.keys(attrs || {}).forEach(function (k) { tr.setAttribute(k, attrs[k]); });
    return tr;
  }
  function item(text, attrs) {
    var li = document.createElement('li');
    li.textContent = text;
    Object.keys(attrs || {}).forEach(function (k) { li.setAttribute(k, attrs[k]); });
    return li;
  }
  function fill(el, children) {
    while (el.firstChild) el.removeChild(el.firstChild);
    children.forEach(function (c) { el.appendChild(c); });
  }
  function button(label, cls, onClick) {
    var b = document.createElement('button');
    b.type = 'button';
    b.textContent = label;
    b.className = cls;
    b.addEventListener('click', function () { b.disabled = true; onClick(); });
    return b;
  }
  function decide(id, approve) {
    var h = headers();
    h['Content-Type'] = 'application/json';
    var body = approve ? { approve: true } : { approve: false, reason: 'rejected on the status page' };
    fetch('/api/v1/approvals/' + encodeURIComponent(id), { method: 'POST', headers: h, body: JSON.stringify(body) })
      .then(function () { return load(); })
      .catch(function () {});
  }
  function showLogin(message) {
    $('login').hidden = false;
    $('login-error').textContent = message || '';
    $('live').textContent = 'not signed in';
    $('live').className = 'off';
  }

  function callRow(r) {
    return row([
      cell(r.ts ? r.ts.slice(11, 19) : ''),
      cell(r.name),
      cell(r.principal),
      cell(r.outcome, 'outcome-' + r.outcome),
      cell(r.durationMs),
      cell(r.attempts),
      cell(r.reason, 'reason'),
    ], { 'data-call-id': r.callId, 'data-outcome': r.outcome, 'data-principal': r.principal, 'data-name': r.name });
  }
  function addCall(r, fresh) {
    if (!r || !r.callId || seen[r.callId]) return;
    seen[r.callId] = true;
    var tr = callRow(r);
    if (fresh) tr.className = 'fresh';
    var body = $('calls').tBodies[0];
    body.insertBefore(tr, body.firstChild);
    while (body.rows.length > 200) body.deleteRow(body.rows.length - 1);
  }

  function render(s) {
    $('version').textContent = s.version;
    $('eras').textContent = s.protocolVersions.join(', ');
    $('viewer').textContent = s.viewer.principal + ' (' + s.viewer.role + ')';
    fill($('upstreams').tBodies[0], s.upstreams.map(function (u) {
      var err = u.lastError ? u.lastError.at.slice(11, 19) + ' ' + u.lastError.message : (u.errorCode || '');
      return row([cell(u.name), cell(u.kind), cell(u.state, 'state-' + u.state), cell(err, 'error')], { 'data-name': u.name, 'data-state': u.state });
    }));
    fill($('tools').tBodies[0], s.tools.map(function (t) {
      return row([cell(t.name), cell(t.server), cell(t.policy), cell(t.pin)], { 'data-name': t.name, 'data-policy': t.policy, 'data-pin': t.pin });
    }));
    fill($('breakers'), s.breakers.length ? s.breakers.map(function (b) {
      return item(b.name + ': ' + b.state + (b.until ? ' until ' + b.until.slice(11, 19) : ''), { 'data-name': b.name, 'data-state': b.state });
    }) : [item('none', { 'class': 'none' })]);
    fill($('approvals'), s.approvals.length ? s.approvals.map(function (a) {
      var li = item(a.tool + ' for ' + a.principal + (a.reason ? ': ' + a.reason : '') + ' ', { 'data-id': a.id, 'data-tool': a.tool });
      if (s.viewer.role === 'operator') {
        li.appendChild(button('Approve', 'approve', function () { decide(a.id, true); }));
        li.appendChild(button('Reject', 'reject', function () { decide(a.id, false); }));
      }
      return li;
    }) : [item('none', { 'class': 'none' })]);
    s.calls.forEach(function (r) { addCall(r, false); });
  }

  function load() {
    return fetch('/api/v1/status', { headers: headers() }).then(function (res) {
      if (res.status === 401) { showLogin(token ? 'that token was refused' : ''); return false; }
      if (!res.ok) throw new Error('status ' + res.status);
      $('login').hidden = true;
      return res.json().then(function (s) { render(s); return true; });
    });
  }
  function reloadSoon() {
    if (reloadTimer) return;
    reloadTimer = setTimeout(function () { reloadTimer = null; load().catch(function () {}); }, 1000);
  }

  function listen() {
    fetch('/api/v1/events', { headers: headers() }).then(function (res) {
      if (!res.ok || !res.body) throw new Error('events ' + res.status);
      $('live').textContent = 'live';
      $('live').className = 'on';
      var reader = res.body.getReader();
      var decoder = new TextDecoder();
      var buffer = '';
      function pump() {
        return reader.read().then(function (chunk) {
          if (chunk.done) throw new Error('events ended');
          buffer += decoder.decode(chunk.value, { stream: true });
          var end;
          while ((end = buffer.indexOf('\\n\\n')) >= 0) {
            var block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            var event = 'message';
            var data = [];
            block.split('\\n').forEach(function (line) {
              if (line.indexOf('event:') === 0) event = line.slice(6).trim();
              else if (line.indexOf('data:') === 0) data.push(line.slice(5).replace(/^ /, ''));
            });
            if (event === 'record' && data.length) {
              try { addCall(JSON.parse(data.join('\\n')), true); } catch (e) { /* not a record */ }
              reloadSoon();
            }
          }
          return pump();
        });
      }
      return pump();
    }).catch(function () {
      $('live').textContent = 'reconnecting…';
      $('live').className = 'off';
      setTimeout(listen, 2000);
    });
  }

  function start() {
    load().then(function (ok) {
      if (!ok) return;
      listen();
      setInterval(function () { load().catch(function () {}); }, 5000);
    }).catch(function () { $('live').textContent = 'unavailable'; $('live').className = 'off'; });
  }

  document.addEventListener('DOMContentLoaded', function () {
    $('login').addEventListener('submit', function (e) {
      e.preventDefault();
      token = $('token').value.trim();
      sessionStorage.setItem(KEY, token);
      start();
    });
    start();
  });
})();
`;
