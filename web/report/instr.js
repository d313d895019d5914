/* web/report/instr.js - draws the charts of squall's instrument pages with uPlot: `squall compare
 * --html` (kind "compare"), `squall ab --html` (kind "ab") and `squall measure --html` (kind
 * "measure").
 *
 * Reads the JSON island (script#squall-data, written by src/output/compare.c and instr.c) and
 * fills each chart container the C side emitted; a container that is not there is a chart the
 * data cannot feed. Text from the data reaches the page through uPlot's legend only (textContent).
 */
(function () {
  'use strict';

  var island = JSON.parse(document.getElementById('squall-data').textContent);
  var charts = [];
  window.squallCharts = charts; /* the browser test inspects these */
  var C = ['#1971c2', '#e8590c', '#2f9e44', '#7048e8', '#c92a2a', '#0c8599', '#f08c00', '#868e96'];

  function num(v) { return typeof v === 'number' && isFinite(v) ? v : null; }
  function fmtNum(v) {
    return v == null ? '' : v.toLocaleString('en-US', { maximumFractionDigits: 1 });
  }
  function fmtUs(v) {
    if (v == null || !isFinite(v)) return '';
    var a = Math.abs(v);
    if (a < 1000) return +v.toPrecision(3) + 'µs';
    if (a < 1e6) return +(v / 1e3).toPrecision(3) + 'ms';
    return +(v / 1e6).toPrecision(3) + 's';
  }
  function pctLabel(x) {
    if (x == null || !(x >= 1)) return '';
    var d = Math.max(0, Math.ceil(Math.log10(x) - 1e-9) - 2);
    return (100 * (1 - 1 / x)).toFixed(d) + '%';
  }
  function fromZero(u, min, max) { return [0, max > 0 ? max * 1.08 : 1]; }
  function make(id, opts, data) {
    var el = document.getElementById(id);
    if (!el) return;
    opts.width = Math.max(320, el.clientWidth);
    opts.height = opts.height || 300;
    charts.push({ id: id, plot: new uPlot(opts, data, el) });
  }
  var secs = { label: 'second', value: function (u, v) { return v == null ? '' : fmtNum(v) + ' s'; } };

  /* Two or more series of {t_s, value} joined on one x axis of seconds. */
  function joined(lists) {
    var xs = {};
    lists.forEach(function (l) { l.forEach(function (p) { xs[p[0]] = true; }); });
    var x = Object.keys(xs).map(Number).sort(function (a, b) { return a - b; });
    var out = [x];
    lists.forEach(function (l) {
      var m = {};
      l.forEach(function (p) { m[p[0]] = p[1]; });
      out.push(x.map(function (t) { return t in m ? m[t] : null; }));
    });
    return out;
  }
  function points(series, f) {
    return (Array.isArray(series) ? series : []).filter(function (r) {
      return r && typeof r === 'object' && num(r.t_s) != null;
    }).map(function (r) { return [Math.round(r.t_s * 1000) / 1000, f(r)]; });
  }
  function rate(r) {
    if (num(r.rps) != null) return r.rps;
    var n = num(r.completed), len = num(r.len_s) || 1;
    return n == null ? null : n / len;
  }
  function serverCpu(r) {
    var o = r.server;
    if (!o || typeof o !== 'object') return null;
    return 100 * ((num(o.cpu_user_s) || 0) + (num(o.cpu_sys_s) || 0)) / (num(r.len_s) || 1);
  }
  function lineSeries(labels, fmt) {
    return [secs].concat(labels.map(function (l, i) {
      return { label: l, stroke: C[i % C.length], width: 2, dash: i % 2 ? [6, 4] : undefined,
        value: function (u, v) { return fmt(v); } };
    }));
  }

  function hdrChart(id, hdr, labels) {
    if (!hdr || !Array.isArray(hdr.x) || !hdr.x.length) return;
    var data = [hdr.x], ser = [{ label: 'percentile', value: function (u, v) { return pctLabel(v); } }];
    labels.forEach(function (l, i) {
      var ys = hdr.curves ? hdr.curves[i] : hdr[i === 0 ? 'a' : 'b'];
      data.push(ys);
      ser.push({ label: l, stroke: C[i % C.length], width: 2, dash: i % 2 ? [6, 4] : undefined,
        value: function (u, v) { return fmtUs(v); } });
    });
    make(id, {
      padding: [16, 28, 0, 0],
      scales: { x: { time: false, distr: 3, log: 10 }, y: { range: fromZero } },
      series: ser,
      axes: [{ label: 'percentile (log scale of 1/(1-p))',
        splits: function (u, i, min, max) {
          var s = [];
          for (var x = 1; x <= max * 1.0001; x *= 10) if (x >= min * 0.9999) s.push(x);
          return s;
        },
        values: function (u, s) { return s.map(pctLabel); } },
      { label: 'latency', size: 70, values: function (u, s) { return s.map(fmtUs); } }]
    }, data);
  }

  /* ---- squall compare ---- */
  if (island.kind === 'compare') {
    var na = 'A: ' + ((island.compare && island.compare.a && island.compare.a.name) || 'A');
    var nb = 'B: ' + ((island.compare && island.compare.b && island.compare.b.name) || 'B');
    hdrChart('chart-cmp-hdr', island.hdr, [na, nb]);
    var over = [['chart-cmp-rps', rate, fmtNum, 'requests / s'],
      ['chart-cmp-p99', function (r) { return r.completed === 0 ? null : num(r.p99_us); }, fmtUs, 'p99'],
      ['chart-cmp-server', serverCpu, function (v) { return v == null ? '' : fmtNum(v) + '%'; },
        'CPU (% of one core)']];
    over.forEach(function (c) {
      make(c[0], {
        scales: { x: { time: false }, y: { range: fromZero } },
        series: lineSeries([na, nb], c[2]),
        axes: [{ label: 'seconds into the run' },
          { label: c[3], size: 70, values: function (u, s) { return s.map(c[2]); } }]
      }, joined([points(island.series_a, c[1]), points(island.series_b, c[1])]));
    });
  }

  /* ---- squall ab: each arm's value per round, and the paired differences ---- */
  if (island.kind === 'ab' && island.ab) {
    var ab = island.ab, arms = Array.isArray(ab.arms) ? ab.arms : [];
    var metrics = Array.isArray(ab.metrics) ? ab.metrics : [];
    metrics.forEach(function (m, mi) {
      var id = 'chart-ab-' + mi;
      var rounds = [];
      arms.forEach(function (a) {
        var v = a.values && Array.isArray(a.values[m.key]) ? a.values[m.key] : [];
        if (v.length > rounds.length) rounds = v.map(function (x, i) { return i + 1; });
      });
      var fmt = m.unit === 'us' ? fmtUs : fmtNum;
      var data = [rounds], ser = [{ label: 'round', value: function (u, v) { return v == null ? '' : 'round ' + v; } }];
      arms.forEach(function (a, i) {
        var v = a.values && Array.isArray(a.values[m.key]) ? a.values[m.key] : [];
        data.push(rounds.map(function (r, k) { return num(v[k]); }));
        ser.push({ label: a.name, stroke: C[i % C.length], width: 2, dash: a.null_test ? [6, 4] : undefined,
          points: { show: true, size: 7 }, value: function (u, v) { return fmt(v); } });
      });
      make(id, {
        height: 260,
        scales: { x: { time: false }, y: { range: fromZero } },
        series: ser,
        axes: [{ label: 'round', values: function (u, s) { return s.map(function (v) { return Number.isInteger(v) ? String(v) : ''; }); } },
          { label: m.label || m.key, size: 70, values: function (u, s) { return s.map(fmt); } }]
      }, data);
    });
  }

  /* ---- squall measure: the server's CPU and RSS through the phases ---- */
  if (island.kind === 'measure' && island.measure) {
    var s = Array.isArray(island.measure.samples) ? island.measure.samples : [];
    var t = s.map(function (p) { return num(p.t_s); });
    make('chart-measure', {
      scales: { x: { time: false }, c: { range: fromZero }, m: { range: fromZero } },
      series: [secs,
        { label: 'CPU', stroke: C[1], width: 2, scale: 'c',
          value: function (u, v) { return v == null ? '' : fmtNum(v) + '%'; } },
        { label: 'RSS', stroke: C[5], width: 2, scale: 'm',
          value: function (u, v) { return v == null ? '' : fmtNum(v) + ' MB'; } }],
      axes: [{ label: 'seconds since the server started' },
        { scale: 'c', label: 'CPU (% of one core)', size: 70, values: function (u, v) { return v.map(fmtNum); } },
        { scale: 'm', side: 1, label: 'RSS (MB)', size: 60, grid: { show: false },
          values: function (u, v) { return v.map(fmtNum); } }]
    }, [t, s.map(function (p) { return num(p.cpu_pct); }),
      s.map(function (p) { return num(p.rss_bytes) == null ? null : p.rss_bytes / 1e6; })]);
  }

  var resizing = 0;
  window.addEventListener('resize', function () {
    clearTimeout(resizing);
    resizing = setTimeout(function () {
      charts.forEach(function (c) {
        var el = document.getElementById(c.id);
        c.plot.setSize({ width: Math.max(320, el.clientWidth), height: c.plot.height });
      });
    }, 100);
  });
  document.documentElement.setAttribute('data-charts', String(charts.length));
  window.squallReady = true;
})();
