/* web/dashboard/live-tables.js - what a run in progress shows besides its charts: the live
 * table (one row per plan step, or the quick run's URL: requests, req/s, failures, p50/p95/p99,
 * max; sortable by a click on a header), the failures seen so far (by status and error kind,
 * each status class and error kind with its first sampled exchange, redacted by the engine),
 * the thresholds judged on the running figures (pass/fail), each check's passes and failures
 * so far (pass/fail), and a latency chart with a log scale, the percentile lines the user
 * picks and a 100 ms view (the second events' bins). It reads the daemon's "live" and "second"
 * events (docs/daemon.md); dashboard.js hands them over (window.squallLive.mount).
 *
 * Every value from the daemon goes into text nodes, never markup. window.squallLive.probe is
 * what the browser test reads.
 */
(function () {
  'use strict';

  var probe = { updates: 0, seconds: 0, sortKey: null, sortDir: 0, logScale: false, fine: false, fineBins: 0 };

  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v == null || v === false) return;
        if (k === 'text') el.textContent = v;
        else if (k === 'class') el.className = v;
        else if (k.slice(0, 2) === 'on') el.addEventListener(k.slice(2), v);
        else el.setAttribute(k, v === true ? '' : v);
      });
    }
    for (var i = 2; i < arguments.length; i++) {
      var c = arguments[i];
      if (c == null) continue;
      el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    }
    return el;
  }
  function isNum(v) { return typeof v === 'number' && isFinite(v); }
  function fmtNum(v, d) {
    if (!isNum(v)) return '—';
    return v.toLocaleString('en-US', { maximumFractionDigits: d == null ? 1 : d });
  }
  function fmtMs(v) {
    if (!isNum(v)) return '—';
    if (v < 1) return +(v * 1000).toPrecision(3) + 'µs';
    if (v < 1000) return +v.toPrecision(3) + 'ms';
    return +(v / 1000).toPrecision(3) + 's';
  }
  function fmtUs(v) { return isNum(v) ? fmtMs(v / 1000) : '—'; }

  /* The table's columns: key, header, how a cell shows, numeric */
  var COLS = [
    ['name', 'step / URL', null, false],
    ['method', 'method', null, false],
    ['requests', 'requests', function (v) { return fmtNum(v, 0); }, true],
    ['rps', 'req/s', function (v) { return fmtNum(v); }, true],
    ['failed', 'failures', function (v) { return fmtNum(v, 0); }, true],
    ['fail_pct', 'fail %', function (v) { return isNum(v) ? fmtNum(v * 100, 1) + '%' : '—'; }, true],
    ['p50_ms', 'p50', fmtMs, true],
    ['p95_ms', 'p95', fmtMs, true],
    ['p99_ms', 'p99', fmtMs, true],
    ['max_ms', 'max', fmtMs, true]
  ];

  function rowKey(r) { return (r.scenario ? r.scenario + ' / ' : '') + r.name; }

  function sortRows(rows) {
    var k = probe.sortKey, dir = probe.sortDir;
    if (!k || !dir) return rows.slice();
    var col = COLS.filter(function (c) { return c[0] === k; })[0];
    return rows.map(function (r, i) { return [r, i]; }).sort(function (a, b) {
      var x = a[0][k], y = b[0][k], c;
      if (col && col[3]) {
        x = isNum(x) ? x : -Infinity;
        y = isNum(y) ? y : -Infinity;
        c = x < y ? -1 : x > y ? 1 : 0;
      } else {
        c = String(x == null ? '' : x).localeCompare(String(y == null ? '' : y));
      }
      return c * dir || a[1] - b[1];
    }).map(function (p) { return p[0]; });
  }

  /* The step table: headers sort (ascending, descending, then the plan's order). */
  function table(box) {
    var thead = h('tr'), tbody = h('tbody'), rows = [], note = h('p', { class: 'muted', id: 'live-rows-note' });
    COLS.forEach(function (c) {
      var th = h('th', { class: c[3] ? 'n sortable' : 'sortable', 'data-sort': c[0], tabindex: '0',
        title: 'sort by ' + c[1], text: c[1] });
      function click() {
        if (probe.sortKey !== c[0]) { probe.sortKey = c[0]; probe.sortDir = c[3] ? -1 : 1; }
        else if (probe.sortDir === (c[3] ? -1 : 1)) probe.sortDir = -probe.sortDir;
        else { probe.sortKey = null; probe.sortDir = 0; }
        render();
      }
      th.addEventListener('click', click);
      th.addEventListener('keydown', function (ev) { if (ev.key === 'Enter') click(); });
      thead.appendChild(th);
    });
    box.appendChild(h('div', { class: 'live-scroll' },
      h('table', { id: 'live-rows', class: 'live-table' }, h('thead', null, thead), tbody)));
    box.appendChild(note);
    function render() {
      Array.prototype.forEach.call(thead.children, function (th) {
        var on = th.getAttribute('data-sort') === probe.sortKey && probe.sortDir;
        th.setAttribute('aria-sort', on ? (probe.sortDir > 0 ? 'ascending' : 'descending') : 'none');
      });
      tbody.textContent = '';
      sortRows(rows).forEach(function (r) {
        var tr = h('tr', { 'data-row': rowKey(r) });
        COLS.forEach(function (c) {
          var v = r[c[0]];
          var td = h('td', { class: c[3] ? 'n' : null, 'data-col': c[0],
            text: c[2] ? c[2](v) : (v == null ? '' : String(v)) });
          if (c[0] === 'name') {
            td.textContent = '';
            if (r.scenario) td.appendChild(h('span', { class: 'muted', text: r.scenario + ' / ' }));
            td.appendChild(document.createTextNode(r.name));
            if (r.url) td.appendChild(h('div', { class: 'muted mono', text: r.url }));
          }
          if (c[0] === 'failed' && v > 0) td.className += ' bad';
          tr.appendChild(td);
        });
        tbody.appendChild(tr);
      });
    }
    return {
      set: function (d) {
        rows = (d.rows || []).map(function (r) {
          var x = Object.assign({}, r);
          x.fail_pct = r.requests > 0 ? r.failed / r.requests : null;
          return x;
        });
        note.textContent = d.rows_left_out ? d.rows_left_out + ' more steps are not shown (at most ' +
          rows.length + ' rows live; every step is in the report)' : '';
        render();
      }
    };
  }

  /* The failures so far: every status >= 400 with its count and the steps it came from, every
   * error kind (no response) with its count. */
  function failures(box) {
    var list = h('ul', { id: 'live-failures', class: 'live-list' });
    box.appendChild(list);
    box.appendChild(h('p', { class: 'muted', id: 'live-failures-note' },
      'One sampled exchange per status class and error kind shows as soon as one exists ' +
      '(request, response head and body start, credentials redacted); the run\'s report keeps a few ' +
      'per class (', h('code', { text: 'sample_responses' }), ').'));
    var rows = [], totals = null, samples = {}, open = {};
    /* a class's exchange, folded: the request, the response head, the body's start */
    function sampleBox(kind, cls) {
      var f = samples[cls];
      if (!f || !f.sample) return null;
      var x = f.sample, req = x.request || {}, resp = x.response || {};
      var text = (req.text || '') + (req.cut ? '\n[… request cut]' : '');
      if (resp.head) text += '\n' + resp.head + (resp.head_cut ? '\n[… head cut]' : '');
      else text += '\n[no response' + (x.error ? ': ' + x.error : '') + ']';
      if (resp.body) text += '\n' + resp.body + (resp.body_cut ? '\n[… ' + fmtNum(resp.body_bytes, 0) + ' bytes in all]' : '');
      var d = h('details', { class: 'live-sample', 'data-sample': cls },
        h('summary', { text: 'sampled exchange (' + cls + (x.status ? ', HTTP ' + x.status : '') +
          (isNum(x.t_s) ? ', at ' + fmtNum(x.t_s, 1) + ' s' : '') + ')' }),
        h('pre', { class: 'mono', text: text }));
      if (open[kind]) d.open = true;
      d.addEventListener('toggle', function () { open[kind] = d.open; });
      return d;
    }
    function render() {
      var by = {}, order = [];
      rows.forEach(function (r) {
        Object.keys(r.status || {}).forEach(function (code) {
          var n = r.status[code];
          var bad = /^\d+$/.test(code) ? Number(code) >= 400 : code === '4xx' || code === '5xx';
          if (!bad || !n) return;
          if (!by[code]) { by[code] = { n: 0, from: [] }; order.push(code); }
          by[code].n += n;
          by[code].from.push(rowKey(r));
        });
      });
      list.textContent = '';
      /* a status class's exchange goes under its own code, else the class's first code */
      var home = {};
      order.sort().forEach(function (code) {
        var cls = /^\d+$/.test(code) ? code.charAt(0) + 'xx' : code, f = samples[cls];
        if (!home[cls] || (f && f.sample && String(f.sample.status) === code)) home[cls] = code;
      });
      order.forEach(function (code) {
        var cls = /^\d+$/.test(code) ? code.charAt(0) + 'xx' : code;
        list.appendChild(h('li', { 'data-kind': 'status ' + code },
          h('span', { class: 'badge fail', text: 'HTTP ' + code }), ' ',
          h('span', { class: 'count', text: fmtNum(by[code].n, 0) }),
          h('span', { class: 'muted', text: ' · ' + by[code].from.join(', ') }),
          home[cls] === code ? sampleBox('status ' + code, cls) : null));
      });
      var ek = (totals && totals.errors_by_kind) || {};
      Object.keys(ek).forEach(function (k) {
        if (!ek[k]) return;
        list.appendChild(h('li', { 'data-kind': 'error ' + k },
          h('span', { class: 'badge fail', text: k }), ' ',
          h('span', { class: 'count', text: fmtNum(ek[k], 0) }),
          h('span', { class: 'muted', text: ' · no response' }),
          sampleBox('error ' + k, k)));
      });
      if (!list.children.length) list.appendChild(h('li', { class: 'muted', 'data-kind': 'none', text: 'No failure so far.' }));
    }
    return {
      rows: function (r, xs) {
        rows = r || [];
        samples = {};
        (xs || []).forEach(function (f) { samples[f['class']] = f; });
        render();
      },
      totals: function (t) { totals = t; render(); }
    };
  }

  /* The thresholds, judged each second on the running figures. */
  function thresholds(box) {
    var tbody = h('tbody'), note = h('p', { class: 'muted', id: 'live-thresholds-note' });
    box.appendChild(h('table', { id: 'live-thresholds', class: 'live-table' },
      h('thead', null, h('tr', null, h('th', { text: 'metric' }), h('th', { text: 'condition' }),
        h('th', { class: 'n', text: 'now' }), h('th', { text: 'verdict' }))), tbody));
    box.appendChild(note);
    function value(t) {
      if (!isNum(t.value)) return '—';
      if (/^http_req_duration|^http_req_(waiting|connecting|tls|sending|receiving|blocked)/.test(t.metric)) return fmtMs(t.value);
      return fmtNum(t.value, 4);
    }
    return {
      set: function (list, left) {
        tbody.textContent = '';
        (list || []).forEach(function (t) {
          var st = !t.live ? 'end' : t.ok ? 'pass' : 'fail';
          tbody.appendChild(h('tr', { 'data-threshold': t.metric + ' ' + t.expr, 'data-ok': st },
            h('td', { class: 'mono', text: t.metric }), h('td', { class: 'mono', text: t.expr }),
            h('td', { class: 'n', text: value(t) }),
            h('td', null, h('span', { class: 'badge ' + st, text: st === 'end' ? 'judged at the end' : st }))));
        });
        if (!list || !list.length) tbody.appendChild(h('tr', null, h('td', { colspan: '4', class: 'muted', text: 'This run has no thresholds.' })));
        note.textContent = left ? left + ' more conditions are judged at the end only' : '';
      }
    };
  }

  /* Each check of the plan's steps: passes and failures so far, fail when any failed. */
  function checks(box) {
    var tbody = h('tbody'), note = h('p', { class: 'muted', id: 'live-checks-note' });
    box.appendChild(h('table', { id: 'live-checks', class: 'live-table' },
      h('thead', null, h('tr', null, h('th', { text: 'step' }), h('th', { text: 'check' }),
        h('th', { class: 'n', text: 'passed' }), h('th', { class: 'n', text: 'failed' }),
        h('th', { text: 'verdict' }))), tbody));
    box.appendChild(note);
    return {
      set: function (list, left) {
        tbody.textContent = '';
        (list || []).forEach(function (c) {
          var st = c.failed > 0 ? 'fail' : 'pass';
          var step = (c.scenario ? c.scenario + ' / ' : '') + c.step;
          tbody.appendChild(h('tr', { 'data-check': step + ' ' + c.check, 'data-ok': st },
            h('td', { text: step }), h('td', { class: 'mono', text: c.check }),
            h('td', { class: 'n', text: fmtNum(c.passed, 0) }),
            h('td', { class: 'n' + (c.failed > 0 ? ' bad' : ''), text: fmtNum(c.failed, 0) }),
            h('td', null, h('span', { class: 'badge ' + st, text: st }))));
        });
        if (!list || !list.length) tbody.appendChild(h('tr', null, h('td', { colspan: '5', class: 'muted', text: 'This run has no checks.' })));
        note.textContent = left ? left + ' more checks are not shown (every check is in the report)' : '';
      }
    };
  }

  /* Latency per second: a log scale option and the percentile lines the user picks; or, with
   * "100 ms", every 100 ms bin so far (the largest latency in it, and the responses it
   * completed on a right-hand axis: a stall shorter than a second shows as a gap). */
  var PCTS = [['p50_us', 'p50', '#2f9e44', true], ['p90_us', 'p90', '#1971c2', true],
    ['p99_us', 'p99', '#e8590c', true], ['max_us', 'max', '#c92a2a', false]];
  function latChart(box) {
    var el = h('div', { class: 'chart', id: 'live-latency-opts' });
    var d = [[]].concat(PCTS.map(function () { return []; }));
    var fd = [[], [], []]; /* the 100 ms bins: end of the bin (s), largest latency (µs), responses */
    var shown = PCTS.map(function (p) { return p[3]; });
    var u = null;
    var log = h('input', { type: 'checkbox', id: 'lat-log' });
    var fine = h('input', { type: 'checkbox', id: 'lat-fine' });
    var ctl = h('div', { class: 'toolbar', id: 'lat-controls' },
      h('label', { class: 'check' }, log, 'log scale'),
      h('label', { class: 'check', title: 'every 100 ms: the largest latency and the responses completed' }, fine, '100 ms'));
    var pcbs = [];
    PCTS.forEach(function (p, i) {
      var cb = h('input', { type: 'checkbox', id: 'lat-' + p[1], 'data-pct': p[1] });
      cb.checked = shown[i];
      cb.addEventListener('change', function () {
        shown[i] = cb.checked;
        if (u && !probe.fine) u.setSeries(i + 1, { show: cb.checked });
      });
      pcbs.push(cb);
      ctl.appendChild(h('label', { class: 'check' }, cb, p[1]));
    });
    var note = h('span', { class: 'muted', id: 'lat-fine-note' });
    ctl.appendChild(note);
    box.appendChild(ctl);
    box.appendChild(el);
    function noteText() {
      note.textContent = !probe.fine ? '1 s per point' :
        fd[0].length ? '100 ms per point: the largest latency (a gap: nothing completed) and the responses completed' :
        'no 100 ms bins yet (past 20 minutes of a run they are in the report only)';
    }
    /* a log scale has no zero: a point under a microsecond sits at 1 µs */
    function floor1(a) { return a.map(function (v) { return v == null ? null : Math.max(v, 1); }); }
    function view() {
      if (probe.fine) return [fd[0], probe.logScale ? floor1(fd[1]) : fd[1], fd[2]];
      if (!probe.logScale) return d;
      return [d[0]].concat(d.slice(1).map(floor1));
    }
    function make() {
      if (u) u.destroy();
      var y = probe.logScale ? { distr: 3, log: 10 } :
        { range: function (uu, min, max) { return [0, max > 0 ? max * 1.08 : 1]; } };
      var series, axes, scales = { x: { time: false }, y: y };
      var yAxis = { label: probe.logScale ? 'latency (log)' : 'latency', size: 70,
        values: function (uu, s) { return s.map(fmtUs); } };
      if (probe.fine) {
        scales.n = { range: function (uu, min, max) { return [0, max > 0 ? max * 1.08 : 1]; } };
        series = [{ label: 'time' },
          { label: 'max', stroke: '#c92a2a', width: 1, spanGaps: false,
            value: function (uu, v) { return fmtUs(v); } },
          { label: 'responses / 100 ms', stroke: '#1971c2', width: 1, scale: 'n',
            value: function (uu, v) { return fmtNum(v, 0); } }];
        axes = [{ label: 'seconds into the run (100 ms per point)' }, yAxis,
          { scale: 'n', side: 1, label: 'responses', size: 60, grid: { show: false },
            values: function (uu, s) { return s.map(function (v) { return fmtNum(v, 0); }); } }];
      } else {
        series = [{ label: 'second' }].concat(PCTS.map(function (p, i) {
          return { label: p[1], stroke: p[2], width: p[0] === 'max_us' ? 1 : 2, show: shown[i],
            value: function (uu, v) { return fmtUs(v); } };
        }));
        axes = [{ label: 'seconds into the run' }, yAxis];
      }
      u = new uPlot({ width: Math.max(320, el.clientWidth || 600), height: 240, scales: scales,
        series: series, axes: axes }, view(), el);
      probe.chart = u;
      pcbs.forEach(function (cb) { cb.disabled = probe.fine; });
      noteText();
    }
    log.addEventListener('change', function () { probe.logScale = log.checked; make(); });
    fine.addEventListener('change', function () { probe.fine = fine.checked; make(); });
    make();
    return {
      add: function (s, f) {
        var gap = !s.completed;
        d[0].push(isNum(s.t_s) ? s.t_s : d[0].length + 1);
        PCTS.forEach(function (p, i) {
          var v = gap ? null : s[p[0]];
          d[i + 1].push(isNum(v) ? v : null);
        });
        if (f && isNum(f.bin_s) && isNum(f.t0_s) && Array.isArray(f.completed)) {
          f.completed.forEach(function (n, k) {
            fd[0].push(+(f.t0_s + (k + 1) * f.bin_s).toFixed(3));
            var mx = f.max_us && f.max_us[k];
            fd[1].push(n > 0 && isNum(mx) ? mx : null);
            fd[2].push(isNum(n) ? n : 0);
          });
          probe.fineBins = fd[0].length;
        }
        u.setData(view());
        if (probe.fine) noteText();
        probe.seconds++;
      }
    };
  }

  /* Builds the panels into box; returns what dashboard.js feeds: second(entry, totals) and
   * live(data) per event. */
  function mount(box) {
    /* a fresh run page: its own counts, the plan's order, a linear scale */
    probe.updates = probe.seconds = 0;
    probe.sortKey = null;
    probe.sortDir = 0;
    probe.logScale = false;
    probe.fine = false;
    probe.fineBins = 0;
    probe.last = null;
    var wrap = h('section', { id: 'live-tables', class: 'live-tables' });
    var tb = h('div', { id: 'live-table-box' }), fb = h('div', { id: 'live-failures-box' }),
      thb = h('div', { id: 'live-thresholds-box' }), ckb = h('div', { id: 'live-checks-box' }), lb = h('div', { id: 'live-latency-box' });
    wrap.appendChild(h('h2', { text: 'Steps (live)' }));
    wrap.appendChild(tb);
    wrap.appendChild(h('div', { class: 'grid2' },
      h('div', null, h('h2', { text: 'Failures' }), fb),
      h('div', null, h('h2', { text: 'Thresholds' }), thb),
      h('div', null, h('h2', { text: 'Checks' }), ckb)));
    wrap.appendChild(h('h2', { text: 'Latency percentiles' }));
    wrap.appendChild(lb);
    box.appendChild(wrap);
    var t = table(tb), f = failures(fb), th = thresholds(thb), ck = checks(ckb), lc = latChart(lb);
    th.set([], 0);
    ck.set([], 0);
    f.rows([]);
    return {
      second: function (s, totals, fine) {
        if (s) lc.add(s, fine);
        if (totals) f.totals(totals);
      },
      live: function (d) {
        t.set(d);
        f.rows(d.rows, d.failure_samples);
        th.set(d.thresholds, d.thresholds_left_out);
        ck.set(d.checks, d.checks_left_out);
        probe.updates++;
        probe.last = d;
      }
    };
  }

  window.squallLive = { mount: mount, probe: probe };
})();
