/* web/dashboard/dashboard.js - the squall dashboard: one page over the daemon's JSON API.
 *
 * Views (the URL's hash): #/runs (the list), #/new (a run from the quick face's fields, or a
 * plan with Validate), #/run/ID (live charts while it runs, the HTML report once it has a
 * result, its stored series otherwise), #/compare/A/B (overlaid percentile curves and a table
 * of deltas), #/inbox (the webhook inbox: per-path counts and latency, the stamped streams'
 * matching, the latest captures, live from its SSE stream). Live figures come from GET /runs/ID/live (Server-Sent Events read through fetch,
 * so the bearer token travels as a header: EventSource cannot send one).
 *
 * Every string from the API reaches the page through textContent (never innerHTML); the run's
 * report is shown in a sandboxed frame (srcdoc, scripts only, no same-origin access).
 */
(function () {
  'use strict';

  var TOKEN_KEY = 'squall-token';
  var C = {
    rps: '#1971c2', err: '#e03131', drop: '#f08c00', vus: '#7048e8',
    p50: '#2f9e44', p90: '#1971c2', p99: '#e8590c', max: '#c92a2a', a: '#1971c2', b: '#e8590c'
  };
  var view = document.getElementById('view');
  var state = { stop: null, timers: [], charts: [] };
  /* what the browser test reads */
  var probe = window.squallDash = { liveUpdates: 0, liveEvents: 0, charts: state.charts, view: '',
    inboxEvents: 0, inboxRefreshes: 0, inboxCleared: 0 };

  /* ---- helpers ---- */

  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v == null || v === false) return;
        if (k === 'text') el.textContent = v;
        else if (k === 'class') el.className = v;
        else if (k.slice(0, 2) === 'on') el.addEventListener(k.slice(2), v);
        else if (v === true) el.setAttribute(k, '');
        else el.setAttribute(k, String(v));
      });
    }
    for (var i = 2; i < arguments.length; i++) {
      var c = arguments[i];
      if (c == null || c === false) continue;
      if (Array.isArray(c)) c.forEach(function (x) { if (x != null) el.appendChild(typeof x === 'string' ? document.createTextNode(x) : x); });
      else el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    }
    return el;
  }
  function num(v) { return typeof v === 'number' && isFinite(v) ? v : null; }
  function fmtNum(v, d) {
    if (v == null || !isFinite(v)) return '—';
    return v.toLocaleString('en-US', { maximumFractionDigits: d == null ? 1 : d });
  }
  function fmtUs(v) {
    if (v == null || !isFinite(v)) return '—';
    var a = Math.abs(v);
    if (a < 1000) return +v.toPrecision(3) + 'µs';
    if (a < 1e6) return +(v / 1e3).toPrecision(3) + 'ms';
    return +(v / 1e6).toPrecision(3) + 's';
  }
  function fmtTime(iso) {
    if (!iso) return '—';
    var d = new Date(iso);
    return isNaN(d) ? iso : d.toLocaleString();
  }
  function fmtDur(a, b) {
    if (!a) return '—';
    var ms = (b ? new Date(b) : new Date()) - new Date(a);
    if (!(ms >= 0)) return '—';
    var s = ms / 1000;
    return s < 60 ? s.toFixed(1) + ' s' : Math.floor(s / 60) + ' m ' + Math.round(s % 60) + ' s';
  }
  function pctLabel(x) {
    if (x == null || !(x >= 1)) return '';
    var d = Math.max(0, Math.ceil(Math.log10(x) - 1e-9) - 2);
    return (100 * (1 - 1 / x)).toFixed(d) + '%';
  }
  function fromZero(u, min, max) { return [0, max > 0 ? max * 1.08 : 1]; }
  function badge(st) { return h('span', { class: 'badge ' + st, 'data-status': st, text: st }); }
  function ended(st) { return st !== 'queued' && st !== 'running'; }

  function clearView() {
    if (state.stop) { state.stop(); state.stop = null; }
    state.timers.forEach(clearInterval);
    state.timers = [];
    state.charts.forEach(function (c) { c.plot.destroy(); });
    state.charts.length = 0;
    view.textContent = '';
  }

  /* ---- the API ---- */

  function token() { try { return sessionStorage.getItem(TOKEN_KEY); } catch (e) { return null; } }
  var askingToken = null;
  function askToken(wrong) {
    if (askingToken) return askingToken;
    var modal = document.getElementById('token-modal');
    var form = document.getElementById('token-form');
    var input = document.getElementById('token-input');
    var err = document.getElementById('token-error');
    err.hidden = !wrong;
    err.textContent = wrong ? 'That token was refused.' : '';
    modal.hidden = false;
    input.value = '';
    input.focus();
    askingToken = new Promise(function (resolve) {
      form.onsubmit = function (ev) {
        ev.preventDefault();
        try { sessionStorage.setItem(TOKEN_KEY, input.value.trim()); } catch (e) { /* private mode */ }
        modal.hidden = true;
        askingToken = null;
        resolve();
      };
    });
    return askingToken;
  }

  /* fetch with the token; a 401 asks for it and tries again. Resolves to the Response. */
  function call(path, opts, retried) {
    opts = opts || {};
    var headers = Object.assign({}, opts.headers || {});
    var t = token();
    if (t) headers.Authorization = 'Bearer ' + t;
    if (opts.json !== undefined) {
      headers['Content-Type'] = 'application/json';
      opts = Object.assign({}, opts, { body: JSON.stringify(opts.json) });
    }
    return fetch(path, Object.assign({}, opts, { headers: headers, cache: 'no-store' }))
      .then(function (r) {
        if (r.status === 401 && !opts.noAuthRetry) {
          return askToken(!!t || retried).then(function () { return call(path, opts, true); });
        }
        return r;
      });
  }
  /* JSON in, JSON out; rejects with the API's {"error"} message. */
  function api(path, opts) {
    return call(path, opts).then(function (r) {
      if (r.status === 204) return null;
      return r.text().then(function (text) {
        var body = null;
        try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
        if (!r.ok) {
          var e = new Error(body && body.error ? body.error : 'HTTP ' + r.status);
          e.status = r.status;
          e.body = body;
          throw e;
        }
        return body;
      });
    });
  }

  /* Follows /runs/ID/live: calls on(event, data) per event until the stream ends or stop(). */
  function follow(id, on) { return sse('/runs/' + id + '/live', on); }

  /* Reads Server-Sent Events from path: on(name, data) per event ('open' once it answers),
   * until the stream ends or the returned stop(). */
  function sse(path, on) {
    var ctl = new AbortController();
    var done = false;
    call(path, { signal: ctl.signal }).then(function (r) {
      if (!r.ok || !r.body) throw new Error('HTTP ' + r.status);
      on('open', {});
      var reader = r.body.getReader(), dec = new TextDecoder(), buf = '';
      function pump() {
        return reader.read().then(function (x) {
          if (x.done) { done = true; return; }
          buf += dec.decode(x.value, { stream: true });
          var i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            var block = buf.slice(0, i), name = 'message', data = '';
            buf = buf.slice(i + 2);
            block.split('\n').forEach(function (line) {
              if (line.indexOf('event: ') === 0) name = line.slice(7);
              else if (line.indexOf('data: ') === 0) data += line.slice(6);
            });
            if (!data) continue;
            probe.liveEvents++;
            try { on(name, JSON.parse(data)); } catch (e) { console.warn('bad event', e); }
          }
          return pump();
        });
      }
      return pump();
    }).catch(function (e) {
      if (!done && e.name !== 'AbortError') on('error', { message: String(e.message || e) });
    });
    return function () { done = true; ctl.abort(); };
  }

  /* ---- charts ---- */

  function chart(el, opts, data) {
    opts.width = Math.max(320, el.clientWidth || 600);
    opts.height = opts.height || 260;
    var u = new uPlot(opts, data, el);
    var c = { id: el.id, plot: u };
    state.charts.push(c);
    return u;
  }
  var secs = { label: 'second', value: function (u, v) { return v == null ? '' : fmtNum(v) + ' s'; } };
  var xAxis = { label: 'seconds into the run' };

  /* The throughput and latency charts of the report, fed second by second. */
  function liveCharts(box) {
    /* changes made while it runs (event: control): dashed marks, drawn on the canvas */
    var marks = [];
    function drawMarks(u) {
      var ctx = u.ctx, b = u.bbox, r = window.devicePixelRatio || 1;
      ctx.save();
      ctx.strokeStyle = '#495057';
      ctx.fillStyle = '#495057';
      ctx.lineWidth = r;
      ctx.setLineDash([4 * r, 3 * r]);
      ctx.font = (11 * r) + 'px sans-serif';
      marks.forEach(function (m, i) {
        var x = u.valToPos(m.t_s, 'x', true);
        if (!(x >= b.left && x <= b.left + b.width)) return;
        ctx.beginPath();
        ctx.moveTo(x, b.top);
        ctx.lineTo(x, b.top + b.height);
        ctx.stroke();
        ctx.fillText(controlText(m), x + 3 * r, b.top + (12 + 12 * (i % 3)) * r);
      });
      ctx.restore();
    }
    var tp = h('div', { class: 'chart', id: 'live-throughput' });
    var lt = h('div', { class: 'chart', id: 'live-latency' });
    box.appendChild(h('div', { class: 'grid2' },
      h('div', null, h('h3', { text: 'Throughput' }), tp),
      h('div', null, h('h3', { text: 'Latency (per second)' }), lt)));
    var d = { t: [], rps: [], err: [], vus: [], p50: [], p90: [], p99: [], max: [] };
    var u1 = chart(tp, {
      hooks: { draw: [drawMarks] },
      scales: { x: { time: false }, y: { range: fromZero }, n: { range: fromZero } },
      series: [secs,
        { label: 'completed/s', stroke: C.rps, width: 2, fill: 'rgba(25,113,194,0.08)', scale: 'y',
          value: function (u, v) { return fmtNum(v); } },
        { label: 'errors/s', stroke: C.err, width: 2, scale: 'n' },
        { label: 'VUs', stroke: C.vus, width: 1, scale: 'n', dash: [2, 3] }],
      axes: [xAxis, { scale: 'y', label: 'requests / s', size: 70, values: function (u, s) { return s.map(function (v) { return fmtNum(v); }); } },
        { scale: 'n', side: 1, label: 'errors / s · VUs', size: 60, grid: { show: false } }]
    }, [[], [], [], []]);
    var u2 = chart(lt, {
      hooks: { draw: [drawMarks] },
      scales: { x: { time: false }, y: { range: fromZero } },
      series: [secs,
        { label: 'p50', stroke: C.p50, width: 2, value: function (u, v) { return fmtUs(v); } },
        { label: 'p90', stroke: C.p90, width: 2, value: function (u, v) { return fmtUs(v); } },
        { label: 'p99', stroke: C.p99, width: 2, value: function (u, v) { return fmtUs(v); } },
        { label: 'max', stroke: C.max, width: 1, dash: [4, 3], value: function (u, v) { return fmtUs(v); } }],
      axes: [xAxis, { label: 'latency', size: 70, values: function (u, s) { return s.map(fmtUs); } }]
    }, [[], [], [], [], []]);
    return {
      add: function (s) {
        var t = num(s.t_s) != null ? s.t_s : d.t.length + 1;
        var len = num(s.len_s) || 1;
        d.t.push(t);
        d.rps.push(num(s.rps) != null ? s.rps : (s.completed || 0) / len);
        d.err.push((s.errors || 0) / len);
        d.vus.push(num(s.vus));
        var gap = s.completed === 0;
        d.p50.push(gap ? null : num(s.p50_us));
        d.p90.push(gap ? null : num(s.p90_us));
        d.p99.push(gap ? null : num(s.p99_us));
        d.max.push(gap ? null : num(s.max_us));
      },
      draw: function () {
        u1.setData([d.t, d.rps, d.err, d.vus]);
        u2.setData([d.t, d.p50, d.p90, d.p99, d.max]);
        probe.liveUpdates++;
      },
      points: function () { return d.t.length; },
      mark: function (c) {
        if (!c || num(c.t_s) == null) return;
        marks.push(c);
        probe.liveMarks = marks.length;
        u1.redraw(false, false);
        u2.redraw(false, false);
      }
    };
  }

  /* "rate 300/s", "4 VUs", "pause", "resume" */
  function controlText(c) {
    var k = String(c.kind || '');
    if (k === 'rate') return fmtNum(num(c.value)) + '/s';
    if (k === 'vus') return fmtNum(num(c.value), 0) + ' VUs';
    return k;
  }

  /* A running run's controls (POST /runs/{id}/control): the rate or the VUs, pause, resume. The
   * API refuses what does not fit the run (a rate for a closed loop...) and says why. */
  function controlPanel(id, box) {
    var rate = h('input', { id: 'control-rate', type: 'number', min: '0', step: 'any', placeholder: 'arrivals/s', size: 8 });
    var vus = h('input', { id: 'control-vus', type: 'number', min: '0', step: '1', placeholder: 'VUs', size: 6 });
    var said = h('span', { id: 'control-state', class: 'muted' });
    var log = h('ul', { id: 'control-log', class: 'muted mono' });
    var paused = false;
    var pause = h('button', { id: 'control-pause', onclick: function () {
      send(paused ? { resume: true } : { pause: true });
    } }, 'Pause');
    function show(a) {
      paused = !!a.paused;
      pause.textContent = paused ? 'Resume' : 'Pause';
      said.className = 'muted';
      said.textContent = paused ? 'paused' : a.open ? 'rate ' + fmtNum(a.rate) + '/s' : fmtNum(a.vus, 0) + ' VUs';
    }
    function send(body) {
      said.className = 'muted';
      return api('/runs/' + id + '/control', { method: 'POST', json: body }).then(show).catch(function (e) {
        said.className = 'bad';
        said.textContent = e.message;
      });
    }
    box.appendChild(h('div', { class: 'toolbar', id: 'control-panel' },
      h('strong', { text: 'Control' }),
      rate, h('button', { id: 'control-rate-set', onclick: function () {
        if (rate.value !== '') send({ rate: Number(rate.value) });
      } }, 'Set rate'),
      vus, h('button', { id: 'control-vus-set', onclick: function () {
        if (vus.value !== '') send({ vus: Number(vus.value) });
      } }, 'Set VUs'),
      pause, said));
    box.appendChild(log);
    return {
      /* a change made (by this page or another client), from the live events */
      seen: function (c) {
        show(c);
        log.appendChild(h('li', { text: fmtNum(c.t_s, 1) + ' s · ' + controlText(c) }));
      }
    };
  }

  function tiles(box, items) {
    box.textContent = '';
    items.forEach(function (it) {
      box.appendChild(h('div', { class: 'tile', 'data-tile': it[0] },
        h('div', { class: 'k', text: it[0] }), h('div', { class: 'v', text: it[1] })));
    });
  }
  /* "2xx 61,204 · timeout 3": the classes and error kinds seen so far */
  function countsLine(t) {
    var parts = [];
    ['1xx', '2xx', '3xx', '4xx', '5xx', 'other'].forEach(function (k) {
      if (t.status && t.status[k]) parts.push(k + ' ' + fmtNum(t.status[k], 0));
    });
    Object.keys(t.errors_by_kind || {}).forEach(function (k) {
      if (t.errors_by_kind[k]) parts.push(k + ' ' + fmtNum(t.errors_by_kind[k], 0));
    });
    return parts.join(' · ');
  }
  function totalsTiles(box, t, running) {
    var line = document.getElementById('counts-line');
    if (line) line.textContent = countsLine(t);
    tiles(box, [
      ['requests/s', fmtNum(running ? t.last_rps : t.rps)],
      ['p50', fmtUs(t.p50_us)], ['p90', fmtUs(t.p90_us)], ['p99', fmtUs(t.p99_us)],
      ['errors', fmtNum(t.errors, 0)], ['VUs', fmtNum(t.vus, 0)],
      ['requests', fmtNum(t.requests, 0)], ['elapsed', fmtNum(t.elapsed_s) + ' s']
    ]);
  }

  /* ---- the header's daemon status ---- */

  function refreshStatus() {
    var el = document.getElementById('daemon-status');
    return api('/health').then(function (hh) {
      el.textContent = '';
      el.appendChild(h('span', { class: 'dot', title: 'connected' }));
      if (hh.run) {
        el.appendChild(h('a', { href: '#/run/' + hh.run.id, 'data-running': hh.run.id },
          'run ' + hh.run.id + ' running · ' + fmtNum(hh.run.rps) + ' req/s · ' + hh.run.workers +
          ' workers · ' + hh.run.vus + ' VUs'));
      } else {
        el.appendChild(h('span', { text: 'idle' }));
      }
      if (hh.queue) el.appendChild(h('span', { text: hh.queue + ' queued' }));
      el.appendChild(h('span', { class: 'muted', text: 'squall ' + hh.version }));
    }).catch(function () {
      el.textContent = '';
      el.appendChild(h('span', { class: 'dot off', title: 'not connected' }));
      el.appendChild(h('span', { text: 'daemon unreachable' }));
    });
  }

  /* ---- #/runs ---- */

  function runsView(params) {
    var status = params.status || '';
    var selected = {};
    var box = h('div');
    var filter = h('select', { id: 'status-filter', onchange: function () { go('#/runs' + (filter.value ? '?status=' + filter.value : '')); } },
      ['', 'running', 'queued', 'finished', 'stopped', 'failed', 'interrupted'].map(function (s) {
        var o = h('option', { value: s, text: s || 'every status' });
        if (s === status) o.selected = true;
        return o;
      }));
    var cmp = h('button', { id: 'compare-selected', disabled: true, onclick: function () {
      var ids = Object.keys(selected).filter(function (k) { return selected[k]; });
      if (ids.length === 2) go('#/compare/' + ids[0] + '/' + ids[1]);
    } }, 'Compare selected');
    view.appendChild(h('div', { class: 'toolbar' }, h('h1', { text: 'Runs' }), h('span', { class: 'grow' }),
      filter, cmp, h('button', { class: 'primary', onclick: function () { go('#/new'); } }, 'New run')));
    view.appendChild(box);
    var pager = h('div', { class: 'pager' });
    view.appendChild(pager);
    var cursor = null;

    function row(r) {
      var cb = h('input', { type: 'checkbox', 'aria-label': 'select run ' + r.id, disabled: !r.has_result,
        onchange: function () {
          selected[r.id] = cb.checked;
          cmp.disabled = Object.keys(selected).filter(function (k) { return selected[k]; }).length !== 2;
        } });
      cb.checked = !!selected[r.id];
      var actions = h('td', { class: 'n' });
      if (!ended(r.status)) {
        actions.appendChild(h('button', { class: 'danger', 'data-action': 'stop', onclick: function (ev) {
          ev.stopPropagation();
          api('/runs/' + r.id + '/stop', { method: 'POST' }).then(load).catch(alertErr);
        } }, 'Stop'));
      }
      var s = r.summary || {};
      var tr = h('tr', { class: 'run-row', 'data-run': r.id },
        h('td', null, cb),
        h('td', { class: 'n' }, h('a', { href: '#/run/' + r.id, text: String(r.id) })),
        h('td', null, badge(r.status)),
        h('td', null, h('a', { href: '#/run/' + r.id, text: r.name || '(unnamed)' })),
        h('td', { text: fmtTime(r.started_at || r.created_at) }),
        h('td', { class: 'n', text: r.started_at ? fmtDur(r.started_at, r.ended_at) : '—' }),
        h('td', { class: 'target mono', title: r.target, text: r.target }),
        h('td', { class: 'n', text: fmtNum(s.requests_per_s) }),
        h('td', { class: 'n', text: fmtUs(s.p99_us) }),
        h('td', { class: 'n', text: fmtNum(s.errors, 0) }),
        actions);
      return tr;
    }

    function render(list, append) {
      var tbody = box.querySelector('tbody');
      if (!append || !tbody) {
        box.textContent = '';
        if (!list.runs.length) {
          box.appendChild(h('p', { class: 'note', id: 'no-runs' }, 'No runs yet. ',
            h('a', { href: '#/new', text: 'Start one.' })));
          return;
        }
        tbody = h('tbody');
        box.appendChild(h('table', { id: 'runs-table' },
          h('thead', null, h('tr', null, h('th'), h('th', { class: 'n', text: 'ID' }), h('th', { text: 'Status' }),
            h('th', { text: 'Name' }), h('th', { text: 'Started' }), h('th', { class: 'n', text: 'Duration' }),
            h('th', { text: 'Target' }), h('th', { class: 'n', text: 'req/s' }), h('th', { class: 'n', text: 'p99' }),
            h('th', { class: 'n', text: 'Errors' }), h('th'))), tbody));
      }
      list.runs.forEach(function (r) { tbody.appendChild(row(r)); });
      pager.textContent = '';
      cursor = list.next;
      if (cursor) pager.appendChild(h('button', { id: 'older', onclick: function () { more(); } }, 'Older runs'));
    }
    function load() {
      return api('/runs' + (status ? '?status=' + encodeURIComponent(status) : '')).then(function (l) { render(l, false); })
        .catch(function (e) { box.textContent = ''; box.appendChild(h('p', { class: 'note bad', text: e.message })); });
    }
    function more() { if (cursor) api(cursor).then(function (l) { render(l, true); }).catch(alertErr); }
    load();
    state.timers.push(setInterval(function () {
      if (!box.querySelector('.badge.running, .badge.queued')) return; /* nothing moves */
      if (!cursor) load();
    }, 2000));
  }

  /* ---- #/new ---- */

  var QUICK_FIELDS = [
    ['url', 'URL', 'text', 'http://127.0.0.1:8080/fast', true],
    ['method', 'Method', 'text', 'GET'],
    ['connections', 'Connections (VUs)', 'number', '64'],
    ['duration', 'Duration', 'text', '10s'],
    ['rate', 'Rate (requests/s, open loop; empty: closed loop)', 'number', ''],
    ['requests', 'Requests in all (-n; empty: timed)', 'number', ''],
    ['stages', 'Stages (e.g. 10s:100,30s:100,10s:0)', 'text', ''],
    ['threads', 'Threads (empty: the daemon\'s default)', 'number', ''],
    ['timeout', 'Request timeout', 'text', '10s']
  ];

  function newView() {
    var tabQuick = h('button', { type: 'button', class: 'active', id: 'tab-quick' }, 'Quick');
    var tabPlan = h('button', { type: 'button', id: 'tab-plan' }, 'Plan');
    var msg = h('div', { id: 'form-message' });
    var quick = h('form', { class: 'run-form', id: 'quick-form' });
    var name = h('input', { type: 'text', name: 'name', id: 'run-name', placeholder: 'optional' });
    quick.appendChild(h('label', { class: 'wide' }, 'Name', name));
    QUICK_FIELDS.forEach(function (f) {
      var inp = h('input', { type: f[2], name: f[0], id: 'q-' + f[0], placeholder: f[3], required: !!f[4],
        min: f[2] === 'number' ? '0' : null, step: f[2] === 'number' ? 'any' : null });
      if (f[0] === 'url' || f[0] === 'method' || f[0] === 'connections' || f[0] === 'duration') inp.value = f[3];
      quick.appendChild(h('label', { class: f[0] === 'url' ? 'wide' : null }, f[1], inp));
    });
    var headers = h('textarea', { name: 'header', id: 'q-header', placeholder: 'Accept: application/json' });
    var body = h('textarea', { name: 'body', id: 'q-body', placeholder: '(none)' });
    quick.appendChild(h('label', null, 'Headers (one per line)', headers));
    quick.appendChild(h('label', null, 'Body', body));
    var h2 = h('input', { type: 'checkbox', id: 'q-http2' });
    quick.appendChild(h('label', { class: 'check' }, h2, 'HTTP/2 (h2c, or ALPN h2 over TLS)'));
    var insecure = h('input', { type: 'checkbox', id: 'q-insecure' });
    quick.appendChild(h('label', { class: 'check' }, insecure, 'Do not verify TLS certificates (-k)'));
    quick.appendChild(h('div', { class: 'wide toolbar' }, h('button', { type: 'submit', class: 'primary', id: 'start-quick' }, 'Start run')));

    var plan = h('form', { class: 'run-form', id: 'plan-form', hidden: true });
    var pname = h('input', { type: 'text', id: 'plan-name', placeholder: 'optional (default: the plan\'s name)' });
    var text = h('textarea', { class: 'plan', id: 'plan-text', spellcheck: 'false',
      placeholder: 'target: http://127.0.0.1:8080\nscenarios:\n  main:\n    executor: constant-vus\n    vus: 10\n    duration: 10s\n    flow:\n      - request: { url: /fast }' });
    var file = h('input', { type: 'file', id: 'plan-file', accept: '.yaml,.yml,text/yaml' });
    var fileName = 'plan.yaml';
    file.addEventListener('change', function () {
      var f = file.files && file.files[0];
      if (!f) return;
      fileName = f.name;
      f.text().then(function (t) { text.value = t; });
    });
    plan.appendChild(h('label', { class: 'wide' }, 'Name', pname));
    plan.appendChild(h('label', { class: 'wide' }, 'Plan (YAML: docs/plans.md)', text));
    plan.appendChild(h('label', null, 'or upload a file', file));
    var validate = h('button', { type: 'button', id: 'validate-plan' }, 'Validate');
    plan.appendChild(h('div', { class: 'wide toolbar' }, validate,
      h('button', { type: 'submit', class: 'primary', id: 'start-plan' }, 'Start run')));

    function show(which) {
      var q = which === 'quick';
      quick.hidden = !q; plan.hidden = q;
      tabQuick.className = q ? 'active' : ''; tabPlan.className = q ? '' : 'active';
      msg.textContent = '';
    }
    tabQuick.addEventListener('click', function () { show('quick'); });
    tabPlan.addEventListener('click', function () { show('plan'); });
    function say(cls, text) {
      msg.textContent = '';
      msg.appendChild(h('p', { class: 'note ' + cls, text: text }));
    }
    function planBody() {
      var b = { plan: text.value, file: fileName };
      if (pname.value.trim()) b.name = pname.value.trim();
      return b;
    }
    validate.addEventListener('click', function () {
      api('/validate', { method: 'POST', json: planBody() })
        .then(function (r) { if (r.ok) say('ok', r.description || 'plan OK'); else say('bad', r.error); })
        .catch(function (e) { say('bad', e.body && e.body.error ? e.body.error : e.message); });
    });
    function start(b) {
      return api('/runs', { method: 'POST', json: b })
        .then(function (r) { go('#/run/' + r.id); })
        .catch(function (e) { say('bad', e.message); });
    }
    plan.addEventListener('submit', function (ev) { ev.preventDefault(); start(planBody()); });
    quick.addEventListener('submit', function (ev) {
      ev.preventDefault();
      var q = {};
      QUICK_FIELDS.forEach(function (f) {
        var v = quick.querySelector('#q-' + f[0]).value.trim();
        if (!v) return;
        q[f[0]] = f[2] === 'number' ? Number(v) : v;
      });
      var hs = headers.value.split('\n').map(function (s) { return s.trim(); }).filter(Boolean);
      if (hs.length) q.header = hs;
      if (body.value) q.body = body.value;
      if (h2.checked) q.http2 = true;
      if (insecure.checked) q.insecure = true;
      var b = { quick: q };
      if (name.value.trim()) b.name = name.value.trim();
      start(b);
    });
    view.appendChild(h('h1', { text: 'New run' }));
    view.appendChild(h('div', { class: 'tabs' }, tabQuick, tabPlan));
    view.appendChild(msg);
    view.appendChild(quick);
    view.appendChild(plan);
  }

  /* ---- #/run/ID ---- */

  function alertErr(e) { window.alert(e.message || String(e)); }

  function runView(id) {
    var head = h('div');
    var tbox = h('div', { class: 'tiles', id: 'tiles' });
    var body = h('div', { id: 'run-body' });
    view.appendChild(head);
    view.appendChild(tbox);
    view.appendChild(body);

    function header(r) {
      head.textContent = '';
      var btns = h('div', { class: 'toolbar' });
      if (!ended(r.status)) {
        btns.appendChild(h('button', { class: 'danger', id: 'stop-run', onclick: function (ev) {
          ev.target.disabled = true;
          api('/runs/' + id + '/stop', { method: 'POST' }).catch(alertErr);
        } }, r.status === 'queued' ? 'Cancel' : 'Stop'));
      } else {
        if (r.request) {
          btns.appendChild(h('button', { id: 'run-again', title: 'queue the same request again',
            onclick: function () {
              api('/runs', { method: 'POST', json: r.request })
                .then(function (x) { go('#/run/' + x.id); }).catch(alertErr);
            } }, 'Run again'));
        }
        if (r.has_result) {
          btns.appendChild(h('button', { id: 'download-json', onclick: function () { download(id); } }, 'Download JSON'));
          btns.appendChild(h('button', { id: 'compare-with', onclick: function () { go('#/compare/' + id); } }, 'Compare with…'));
        }
        btns.appendChild(h('button', { class: 'danger', id: 'delete-run', onclick: function () {
          if (!window.confirm('Delete run ' + id + ' and its results?')) return;
          api('/runs/' + id, { method: 'DELETE' }).then(function () { go('#/runs'); }).catch(alertErr);
        } }, 'Delete'));
      }
      head.appendChild(h('div', { class: 'toolbar' },
        h('h1', null, 'Run ' + r.id + (r.name ? ' · ' : ''), r.name ? h('span', { text: r.name }) : null),
        badge(r.status), h('span', { class: 'grow' }), btns));
      head.appendChild(h('p', { class: 'muted' },
        h('span', { class: 'mono', text: r.target }), ' · ' + r.kind + ' · created ' + fmtTime(r.created_at) +
        (r.started_at ? ' · started ' + fmtTime(r.started_at) : '') +
        (r.ended_at ? ' · ended ' + fmtTime(r.ended_at) : '')));
      if (r.reason) head.appendChild(h('p', { class: 'note bad', id: 'run-reason', text: r.reason }));
    }

    function showLive(r) {
      var lc = null, lastTotals = null;
      body.appendChild(h('p', { class: 'muted', id: 'live-note',
        text: r.status === 'queued' ? 'Waiting in the queue…' : 'Live: updated every second.' }));
      body.appendChild(h('p', { class: 'muted mono', id: 'counts-line' }));
      var cp = controlPanel(id, body);
      lc = liveCharts(body);
      var tabs = window.squallLive ? window.squallLive.mount(body) : null; /* live-tables.js */
      state.stop = follow(id, function (ev, d) {
        if (tabs && ev === 'live') tabs.live(d);
        if (tabs && ev === 'second') tabs.second(d.second, d.totals, d.fine);
        if (ev === 'status') {
          var note = document.getElementById('live-note');
          if (note) note.textContent = d.status === 'queued' ? 'Waiting in the queue…' : 'Live: updated every second.';
          if (d.status === 'running' && r.status === 'queued') {
            r.status = 'running';
            api('/runs/' + id).then(header).catch(function () {});
          }
        } else if (ev === 'second') {
          lc.add(d.second);
          lastTotals = d.totals;
          if (d.totals) totalsTiles(tbox, d.totals, true);
          lc.draw();
        } else if (ev === 'control') {
          lc.mark(d.control);
          cp.seen(d.control);
        } else if (ev === 'settle') {
          var sn = document.getElementById('live-note');
          if (sn) sn.textContent = 'Load done (' + fmtNum(d.stamped) + ' stamped): the sink waits for the events still on their way…';
        } else if (ev === 'end') {
          state.stop = null;
          setTimeout(function () { route(); }, 300); /* the stored run: its report */
        } else if (ev === 'error') {
          body.insertBefore(h('p', { class: 'note bad', text: 'Live stream lost: ' + d.message }), body.firstChild);
        }
      });
      return lastTotals;
    }

    function showReport(r) {
      var frame = h('iframe', { class: 'report', id: 'report-frame', sandbox: 'allow-scripts',
        title: 'the run\'s report', referrerpolicy: 'no-referrer' });
      body.appendChild(frame);
      call('/runs/' + id + '/report').then(function (resp) {
        if (!resp.ok) throw new Error('HTTP ' + resp.status);
        return resp.text();
      }).then(function (html) {
        /* the report tells its height to this page (the frame has no same-origin access) */
        var tell = '<script>(function(){function t(){parent.postMessage({squallReportHeight:' +
          'document.documentElement.scrollHeight},"*")}addEventListener("load",t);' +
          'addEventListener("resize",t);setTimeout(t,300)})();<\/script>';
        var i = html.lastIndexOf('</body>');
        frame.srcdoc = i >= 0 ? html.slice(0, i) + tell + html.slice(i) : html + tell;
      }).catch(function (e) { body.appendChild(h('p', { class: 'note bad', text: 'The report could not be loaded: ' + e.message })); });
      var res = r.result || {};
      var lat = res.latency || {};
      tiles(tbox, [
        ['requests/s', fmtNum(res.rate && res.rate.requests_per_s)],
        ['p50', fmtUs(lat.p50_us)], ['p90', fmtUs(lat.p90_us)], ['p99', fmtUs(lat.p99_us)],
        ['errors', fmtNum(r.summary && r.summary.errors, 0)],
        ['requests', fmtNum(res.requests && res.requests.sent, 0)],
        ['duration', fmtNum(res.duration_s, 2) + ' s']
      ]);
    }

    function showSeries(r) {
      body.appendChild(h('p', { class: 'muted', text: 'No result document: the seconds stored before the run ended.' }));
      body.appendChild(h('p', { class: 'muted mono', id: 'counts-line' }));
      var lc = liveCharts(body);
      api('/runs/' + id + '/series').then(function (s) {
        s.series.forEach(function (x) { lc.add(x); });
        lc.draw();
        var last = s.series.length ? s.series[s.series.length - 1].totals : null;
        if (last) totalsTiles(tbox, last, false);
        else tbox.textContent = '';
      }).catch(function () {});
    }

    api('/runs/' + id).then(function (r) {
      header(r);
      if (!ended(r.status)) showLive(r);
      else if (r.has_result) showReport(r);
      else showSeries(r);
    }).catch(function (e) {
      head.appendChild(h('p', { class: 'note bad', text: e.status === 404 ? 'There is no run ' + id + '.' : e.message }));
    });
  }

  function download(id) {
    call('/runs/' + id + '/result').then(function (r) { return r.blob(); }).then(function (b) {
      var a = h('a', { href: URL.createObjectURL(b), download: 'squall-run-' + id + '.json' });
      document.body.appendChild(a);
      a.click();
      setTimeout(function () { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
    }).catch(alertErr);
  }

  window.addEventListener('message', function (ev) {
    var f = document.getElementById('report-frame');
    if (f && ev.source === f.contentWindow && ev.data && typeof ev.data.squallReportHeight === 'number') {
      f.style.height = Math.min(20000, Math.max(600, ev.data.squallReportHeight + 20)) + 'px';
    }
  });

  /* ---- #/compare/A/B ---- */

  function compareView(a, b) {
    var pickA = h('select', { id: 'compare-a' }), pickB = h('select', { id: 'compare-b' });
    var out = h('div', { id: 'compare-out' });
    view.appendChild(h('h1', { text: 'Compare runs' }));
    view.appendChild(h('div', { class: 'toolbar' }, 'A', pickA, 'B', pickB,
      h('button', { class: 'primary', id: 'compare-go', onclick: function () {
        if (pickA.value && pickB.value) go('#/compare/' + pickA.value + '/' + pickB.value);
      } }, 'Compare')));
    view.appendChild(out);
    api('/runs?limit=200').then(function (l) {
      var rs = l.runs.filter(function (r) { return r.has_result; });
      [pickA, pickB].forEach(function (sel, i) {
        sel.appendChild(h('option', { value: '', text: '(choose a run)' }));
        rs.forEach(function (r) {
          var o = h('option', { value: r.id, text: '#' + r.id + ' ' + (r.name || r.target) + ' (' + r.status + ')' });
          if (String(r.id) === String(i ? b : a)) o.selected = true;
          sel.appendChild(o);
        });
      });
    }).catch(function () {});
    if (!a || !b) {
      out.appendChild(h('p', { class: 'note', text: 'Choose two runs with results.' }));
      return;
    }
    api('/compare?a=' + a + '&b=' + b).then(function (c) {
      var la = 'run ' + a, lb = 'run ' + b;
      if (c.percentiles) {
        var el = h('div', { class: 'chart', id: 'compare-percentiles' });
        out.appendChild(h('h2', { text: 'Latency by percentile' }));
        out.appendChild(el);
        var p = c.percentiles;
        chart(el, {
          padding: [16, 28, 0, 0],
          scales: { x: { time: false, distr: 3, log: 10 }, y: { range: fromZero } },
          series: [{ label: 'percentile', value: function (u, v) { return pctLabel(v); } },
            { label: la, stroke: C.a, width: 2, value: function (u, v) { return fmtUs(v); } },
            { label: lb, stroke: C.b, width: 2, dash: [6, 4], value: function (u, v) { return fmtUs(v); } }],
          axes: [{ label: 'percentile (log scale of 1/(1-p))',
            splits: function (u, i, min, max) {
              var s = [];
              for (var x = 1; x <= max * 1.0001; x *= 10) if (x >= min * 0.9999) s.push(x);
              return s;
            },
            values: function (u, s) { return s.map(pctLabel); } },
          { label: 'latency', size: 70, values: function (u, s) { return s.map(fmtUs); } }]
        }, [p.x, p.a, p.b]);
      } else {
        out.appendChild(h('p', { class: 'note', text: 'A run has no latency histogram: no percentile curves.' }));
      }
      out.appendChild(h('h2', { text: 'Figures' }));
      var tb = h('tbody');
      c.rows.forEach(function (r) {
        var f = r.unit === 'us' ? fmtUs : r.unit === 's' ? function (v) { return fmtNum(v, 2) + ' s'; } :
          function (v) { return fmtNum(v, r.unit === 'per_s' ? 1 : 0); };
        var ch = r.change == null ? '—' : (r.change >= 0 ? '+' : '') + (100 * r.change).toFixed(1) + '%';
        tb.appendChild(h('tr', { 'data-key': r.key },
          h('th', { text: r.label }), h('td', { class: 'n', text: f(r.a) }), h('td', { class: 'n', text: f(r.b) }),
          h('td', { class: 'n', text: r.delta == null ? '—' : f(r.delta) }),
          h('td', { class: 'n ' + (r.verdict === 'better' ? 'better' : r.verdict === 'worse' ? 'worse' : ''), text: ch })));
      });
      out.appendChild(h('table', { id: 'compare-table' },
        h('thead', null, h('tr', null, h('th'), h('th', { class: 'n' }, h('a', { href: '#/run/' + a, text: la })),
          h('th', { class: 'n' }, h('a', { href: '#/run/' + b, text: lb })), h('th', { class: 'n', text: 'B − A' }),
          h('th', { class: 'n', text: 'change' }))), tb));
    }).catch(function (e) { out.appendChild(h('p', { class: 'note bad', text: e.message })); });
  }

  /* ---- the webhook inbox (#/inbox) ---- */

  /* Per-path counts and latency, the stamped streams' matching, and the latest captures, live:
   * the inbox's SSE stream (GET /inbox/_inbox/stream) says when something arrived, and the view
   * then reads what is new from /inbox/_inbox/captures?since= and the counts from stats. */
  function inboxView(params) {
    var KEEP = 100; /* capture rows shown */
    var prefix = params.path || '';
    var cursor = null, rows = [], timer = null, busy = false, again = false;
    var filter = h('input', { id: 'inbox-filter', type: 'search', placeholder: 'path starts with… (/hooks)',
      value: prefix, 'aria-label': 'filter by path' });
    var dot = h('span', { class: 'dot off', id: 'inbox-live', title: 'live' });
    filter.addEventListener('change', function () {
      go('#/inbox' + (filter.value ? '?path=' + encodeURIComponent(filter.value) : ''));
    });
    var clear = h('button', { class: 'danger', id: 'inbox-clear', onclick: function () {
      api('/inbox/_inbox/captures', { method: 'DELETE' }).then(function () {
        rows = [];
        probe.inboxCleared++;
        refresh();
      }).catch(alertErr);
    } }, 'Clear captures');
    view.appendChild(h('div', { class: 'toolbar' }, h('h1', { text: 'Webhook inbox' }), dot,
      h('span', { class: 'grow' }), filter, clear));
    view.appendChild(h('p', { class: 'muted' }, 'Point webhooks at ',
      h('code', { text: location.origin + '/inbox/…' }),
      '. Calls carrying a squall event stamp ({{$stamp}}) are matched to their sends.'));
    var tiles = h('div', { class: 'tiles', id: 'inbox-tiles' });
    var paths = h('div', { id: 'inbox-paths' });
    var streams = h('div', { id: 'inbox-streams' });
    var caps = h('div', { id: 'inbox-captures' });
    view.appendChild(tiles);
    view.appendChild(h('h2', { text: 'Paths' }));
    view.appendChild(paths);
    view.appendChild(h('h2', { text: 'Stamped streams' }));
    view.appendChild(streams);
    view.appendChild(h('h2', { text: 'Latest captures' }));
    view.appendChild(caps);

    function tile(k, v, id) { return h('div', { class: 'tile', 'data-tile': id }, h('div', { class: 'k', text: k }), h('div', { class: 'v', text: v })); }
    function matches(p) { return !prefix || p.slice(0, prefix.length) === prefix; }

    function renderStats(st) {
      tiles.textContent = '';
      [['captured', 'captured'], ['kept', 'stored'], ['evicted', 'evicted'], ['truncated', 'truncated'],
        ['stamped', 'stamped']].forEach(function (t) { tiles.appendChild(tile(t[0], fmtNum(st[t[1]], 0), t[1])); });
      var names = Object.keys(st.paths || {}).filter(matches).sort();
      paths.textContent = '';
      if (!names.length) {
        paths.appendChild(h('p', { class: 'note', id: 'inbox-no-paths', text: 'Nothing captured' + (prefix ? ' under ' + prefix : '') + ' yet.' }));
      } else {
        var tb = h('tbody');
        names.forEach(function (n) {
          var p = st.paths[n], l = p.latency || {};
          tb.appendChild(h('tr', { 'data-path': n },
            h('td', { class: 'mono', text: n }),
            h('td', { class: 'n', 'data-k': 'count', text: fmtNum(p.count, 0) }),
            h('td', { class: 'n', 'data-k': 'stamped', text: fmtNum(p.stamped, 0) }),
            h('td', { class: 'n', 'data-k': 'missing', text: fmtNum(p.missing, 0) }),
            h('td', { class: 'n', 'data-k': 'duplicates', text: fmtNum(p.duplicates, 0) }),
            h('td', { class: 'n', 'data-k': 'out_of_order', text: fmtNum(p.out_of_order, 0) }),
            h('td', { class: 'n', 'data-k': 'p50', text: fmtUs(l.p50_us) }),
            h('td', { class: 'n', 'data-k': 'p90', text: fmtUs(l.p90_us) }),
            h('td', { class: 'n', 'data-k': 'p99', text: fmtUs(l.p99_us) }),
            h('td', { class: 'n', 'data-k': 'max', text: fmtUs(l.max_us) })));
        });
        paths.appendChild(h('table', null, h('thead', null, h('tr', null,
          ['path', 'count', 'stamped', 'missing', 'duplicates', 'out of order', 'p50', 'p90', 'p99', 'max'].map(function (t, i) {
            return h('th', { class: i ? 'n' : null, text: t });
          }))), tb));
      }
      var ss = (st.streams || []).filter(function (s) { return s.path == null || matches(s.path); });
      streams.textContent = '';
      if (!ss.length) {
        streams.appendChild(h('p', { class: 'muted', text: 'No stamped event yet.' }));
      } else {
        var sb = h('tbody');
        ss.forEach(function (s) {
          sb.appendChild(h('tr', { 'data-stream': s.stream },
            h('td', { class: 'mono', text: s.stream }), h('td', { class: 'mono', text: s.path || '' }),
            h('td', { class: 'n', text: fmtNum(s.received, 0) }), h('td', { class: 'n', text: fmtNum(s.missing, 0) }),
            h('td', { class: 'n', text: fmtNum(s.duplicates, 0) }), h('td', { class: 'n', text: fmtNum(s.out_of_order, 0) }),
            h('td', { class: 'n', text: fmtNum(s.highest_seq, 0) })));
        });
        streams.appendChild(h('table', null, h('thead', null, h('tr', null,
          ['stream', 'first path', 'received', 'missing', 'duplicates', 'out of order', 'highest seq'].map(function (t, i) {
            return h('th', { class: i > 1 ? 'n' : null, text: t });
          }))), sb));
      }
    }

    function renderCaptures() {
      caps.textContent = '';
      if (!rows.length) {
        caps.appendChild(h('p', { class: 'note', id: 'inbox-no-captures', text: 'No captures' + (prefix ? ' under ' + prefix : '') + '.' }));
        return;
      }
      var tb = h('tbody');
      rows.slice().reverse().forEach(function (c) {
        var st = c.stamp;
        var body = c.body.length > 160 ? c.body.slice(0, 160) + '…' : c.body;
        tb.appendChild(h('tr', { class: 'capture-row', 'data-seq': c.seq, 'data-path': c.path },
          h('td', { class: 'n', text: String(c.seq) }),
          h('td', { text: new Date(c.time_ms).toLocaleTimeString() }),
          h('td', { text: c.method }),
          h('td', { class: 'mono target', title: c.path, text: c.path }),
          h('td', { class: 'mono', 'data-k': 'stamp', text: st ? st.stream + ' #' + st.seq + (st.duplicate ? ' (duplicate)' : '') : '—' }),
          h('td', { class: 'n', text: st ? fmtUs(st.latency_us) : '—' }),
          h('td', { class: 'n', text: fmtNum(c.body_len, 0) + (c.truncated ? ' (cut)' : '') }),
          h('td', { class: 'mono target', title: body, text: body })));
      });
      caps.appendChild(h('table', null, h('thead', null, h('tr', null,
        ['seq', 'time', 'method', 'path', 'stamp', 'latency', 'bytes', 'body'].map(function (t, i) {
          return h('th', { class: i === 0 || i === 5 || i === 6 ? 'n' : null, text: t });
        }))), tb));
    }

    /* What is new since the cursor (a few pages at most), then the counts. */
    function refresh() {
      if (busy) { again = true; return; }
      busy = true;
      var q = prefix ? '&path=' + encodeURIComponent(prefix) : '';
      var pages = 0;
      function page() {
        return api('/inbox/_inbox/captures?limit=1000&since=' + cursor + q).then(function (d) {
          if (d.oldest > 0 && rows.length && rows[0].seq < d.oldest) rows = rows.filter(function (c) { return c.seq >= d.oldest; });
          rows = rows.concat(d.captures).slice(-KEEP);
          cursor = d.next;
          if (d.more && ++pages < 5) return page();
        });
      }
      var first = cursor == null ? api('/inbox/_inbox/stats').then(function (st) {
        cursor = Math.max(0, st.next_seq - 1 - 1000);
      }) : Promise.resolve();
      first.then(page).then(function () { return api('/inbox/_inbox/stats'); }).then(function (st) {
        if (!view.contains(tiles)) return;
        renderStats(st);
        renderCaptures();
        probe.inboxRefreshes++;
      }).catch(function (e) {
        caps.textContent = '';
        caps.appendChild(h('p', { class: 'note bad', text: e.message }));
      }).then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
    }
    function soon() { if (!timer) timer = setTimeout(function () { timer = null; refresh(); }, 150); }

    refresh();
    var stop = sse('/inbox/_inbox/stream', function (name) {
      if (name === 'open') { dot.className = 'dot'; return; }
      if (name === 'error') { dot.className = 'dot off'; return; }
      probe.inboxEvents++;
      soon();
    });
    state.stop = function () { stop(); clearTimeout(timer); };
    /* a slow trickle the stream batches, or a stream that failed: poll too, gently */
    state.timers.push(setInterval(refresh, 5000));
  }

  /* ---- routing ---- */

  function go(hash) { if (location.hash === hash) route(); else location.hash = hash; }

  function route() {
    clearView();
    var hash = location.hash || '#/runs';
    var q = {}, qi = hash.indexOf('?');
    if (qi >= 0) {
      hash.slice(qi + 1).split('&').forEach(function (kv) {
        var p = kv.split('=');
        q[decodeURIComponent(p[0])] = decodeURIComponent(p[1] || '');
      });
      hash = hash.slice(0, qi);
    }
    var parts = hash.replace(/^#\/?/, '').split('/');
    var name = parts[0] || 'runs';
    probe.view = name;
    document.querySelectorAll('nav a').forEach(function (a) {
      a.className = a.getAttribute('data-nav') === name ? 'active' : '';
    });
    if (name === 'new') newView();
    else if (name === 'run' && /^\d+$/.test(parts[1] || '')) runView(parts[1]);
    else if (name === 'compare') compareView(parts[1], parts[2]);
    else if (name === 'inbox') inboxView(q);
    else runsView(q);
    document.title = 'squall · ' + (name === 'run' ? 'run ' + parts[1] : name);
  }

  var resizing = 0;
  window.addEventListener('resize', function () {
    clearTimeout(resizing);
    resizing = setTimeout(function () {
      state.charts.forEach(function (c) {
        var el = c.plot.root.parentNode;
        if (el) c.plot.setSize({ width: Math.max(320, el.clientWidth), height: c.plot.height });
      });
    }, 100);
  });
  window.addEventListener('hashchange', route);
  route();
  refreshStatus();
  setInterval(refreshStatus, 3000);
  window.squallReady = true;
})();
