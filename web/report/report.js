/* web/report/report.js - draws the squall HTML report's charts with uPlot.
 *
 * Reads the JSON island (script#squall-data: {"result": the squall.result/1 document, "hdr": the
 * percentile curves src/output/html.c computed from its histograms}) and fills each chart
 * container the C side emitted; a container that is not there is a chart the document cannot
 * feed (no series, no histogram), and the C side has put a note in its place. Text from the
 * document reaches the page through textContent and uPlot's legend only, never innerHTML.
 */
(function () {
  'use strict';

  var island = JSON.parse(document.getElementById('squall-data').textContent);
  var doc = island.result || {};
  var open = doc.mode === 'open-loop';
  var charts = [];
  window.squallCharts = charts; /* the browser test inspects these */

  var C = {
    rps: '#1971c2', err: '#e03131', drop: '#f08c00', vus: '#7048e8',
    p50: '#2f9e44', p90: '#1971c2', p99: '#e8590c', max: '#c92a2a',
    corrected: '#1971c2', uncorrected: '#e8590c', bar: '#1c7ed6'
  };

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
  /* x = 1/(1-p): 1 -> 0%, 10 -> 90%, 100 -> 99%, 1000 -> 99.9% */
  function pctLabel(x) {
    if (x == null || !(x >= 1)) return '';
    var d = Math.max(0, Math.ceil(Math.log10(x) - 1e-9) - 2);
    return (100 * (1 - 1 / x)).toFixed(d) + '%';
  }
  function fromZero(u, min, max) { return [0, max > 0 ? max * 1.08 : 1]; }

  /* Changes made while the run went (doc.controls: rate, vus, pause, resume): a dashed vertical
   * line and a short label at each one's time, on every chart over time. Drawn on the canvas
   * (fillText), never as markup. */
  var controls = Array.isArray(doc.controls) ? doc.controls.filter(function (c) {
    return c && typeof c === 'object' && num(c.t_s) != null;
  }) : [];
  window.squallControls = controls.length;
  function controlLabel(c) {
    var k = String(c.kind || '');
    var v = k === 'rate' ? fmtNum(num(c.value)) + '/s' : k === 'vus' ? fmtNum(num(c.value)) + ' VUs' : '';
    return (k === 'rate' || k === 'vus' ? v : k) + (c.scenario ? ' (' + String(c.scenario) + ')' : '');
  }
  function markControls(u) {
    var ctx = u.ctx, b = u.bbox, r = window.devicePixelRatio || 1;
    ctx.save();
    ctx.strokeStyle = '#495057';
    ctx.fillStyle = '#495057';
    ctx.lineWidth = r;
    ctx.setLineDash([4 * r, 3 * r]);
    ctx.font = (11 * r) + 'px sans-serif';
    controls.forEach(function (c, i) {
      var x = u.valToPos(c.t_s, 'x', true);
      if (!(x >= b.left && x <= b.left + b.width)) return;
      ctx.beginPath();
      ctx.moveTo(x, b.top);
      ctx.lineTo(x, b.top + b.height);
      ctx.stroke();
      ctx.fillText(controlLabel(c), x + 3 * r, b.top + (12 + 12 * (i % 3)) * r);
    });
    ctx.restore();
  }

  function make(id, opts, data, marks) {
    var el = document.getElementById(id);
    if (!el) return;
    if (marks && controls.length) {
      opts.hooks = opts.hooks || {};
      opts.hooks.draw = (opts.hooks.draw || []).concat([markControls]);
    }
    opts.width = Math.max(320, el.clientWidth);
    opts.height = opts.height || 300;
    var u = new uPlot(opts, data, el);
    charts.push({ id: id, plot: u, marks: !!(marks && controls.length) });
  }

  /* ---- over time: the per-second series (optional in the document) ---- */
  var rows = Array.isArray(doc.series) ? doc.series.filter(function (r) {
    return r && typeof r === 'object';
  }) : [];
  rows.forEach(function (r, i) { r.__t = num(r.t_s) != null ? r.t_s : i + 1; });
  rows.sort(function (a, b) { return a.__t - b.__t; });
  function col(k) { return rows.map(function (r) { return num(r[k]); }); }
  /* completed per second; from the count and the interval's length if "rps" is missing */
  var rps = rows.map(function (r) {
    if (num(r.rps) != null) return r.rps;
    var n = num(r.completed), len = num(r.len_s) || 1;
    return n == null ? null : n / len;
  });
  var vus = rows.map(function (r) { return num(r.vus) != null ? r.vus : num(r.active); });
  /* a latency of a second with no completed response is a gap, not a zero */
  function lat(k) {
    return rows.map(function (r) { return r.completed === 0 ? null : num(r[k]); });
  }
  var t = rows.map(function (r) { return r.__t; });
  var secs = { label: 'second', value: function (u, v) { return v == null ? '' : fmtNum(v) + ' s'; } };
  var xAxis = { label: 'seconds into the run' };

  if (rows.length) {
    make('chart-throughput', {
      scales: { x: { time: false }, y: { range: fromZero }, n: { range: fromZero } },
      series: [secs,
        { label: 'completed/s', stroke: C.rps, width: 2, fill: 'rgba(25,113,194,0.08)',
          scale: 'y', value: function (u, v) { return fmtNum(v); } },
        { label: 'errors/s', stroke: C.err, width: 2, scale: 'n' },
        { label: 'dropped/s', stroke: C.drop, width: 2, scale: 'n', dash: [6, 4] },
        { label: open ? 'in flight' : 'VUs', stroke: C.vus, width: 1, scale: 'n', dash: [2, 3] }],
      axes: [xAxis,
        { scale: 'y', label: 'requests / s', size: 70,
          values: function (u, s) { return s.map(fmtNum); } },
        { scale: 'n', side: 1, label: open ? 'errors, dropped / s · in flight' : 'errors / s · VUs', size: 60,
          grid: { show: false }, values: function (u, s) { return s.map(fmtNum); } }]
    }, [t, rps, col('errors'), col('dropped'), vus], true);

    make('chart-latency', {
      scales: { x: { time: false }, y: { range: fromZero } },
      series: [secs,
        { label: 'p50', stroke: C.p50, width: 2, value: function (u, v) { return fmtUs(v); } },
        { label: 'p90', stroke: C.p90, width: 2, value: function (u, v) { return fmtUs(v); } },
        { label: 'p99', stroke: C.p99, width: 2, value: function (u, v) { return fmtUs(v); } },
        { label: 'max', stroke: C.max, width: 1, dash: [4, 3],
          value: function (u, v) { return fmtUs(v); } }],
      axes: [xAxis, { label: 'latency', size: 70, values: function (u, s) { return s.map(fmtUs); } }]
    }, [t, lat('p50_us'), lat('p90_us'), lat('p99_us'), lat('max_us')], true);
  }

  /* ---- every 100 ms: completions and the largest latency (a sub-second stall shows) ---- */
  var fine = doc.series_100ms && typeof doc.series_100ms === 'object' ? doc.series_100ms : null;
  if (fine && Array.isArray(fine.completed) && fine.completed.length) {
    var bin = num(fine.bin_s) || 0.1;
    var ft = fine.completed.map(function (v, i) { return +((i + 1) * bin).toFixed(3); });
    var fmax = (Array.isArray(fine.max_us) ? fine.max_us : []).map(function (v, i) {
      return fine.completed[i] ? num(v) : null; /* no response in the bin: a gap */
    });
    make('chart-fine', {
      scales: { x: { time: false }, y: { range: fromZero }, l: { range: fromZero } },
      series: [{ label: 'bin end', value: function (u, v) { return v == null ? '' : fmtNum(v) + ' s'; } },
        { label: 'completed', stroke: C.rps, width: 1, fill: 'rgba(25,113,194,0.08)', scale: 'y',
          value: function (u, v) { return fmtNum(v); } },
        { label: 'max latency', stroke: C.max, width: 2, scale: 'l',
          value: function (u, v) { return fmtUs(v); } }],
      axes: [xAxis,
        { scale: 'y', label: 'responses / ' + bin * 1000 + ' ms', size: 70,
          values: function (u, s) { return s.map(fmtNum); } },
        { scale: 'l', side: 1, label: 'max latency', size: 70, grid: { show: false },
          values: function (u, s) { return s.map(fmtUs); } }]
    }, [ft, fine.completed.map(num), fmax], true);
  }

  /* ---- a plan's steps over time: each request step's p99 and responses per second ---- */
  var steps = Array.isArray(doc.steps) ? doc.steps.filter(function (st) {
    return st && st.series && Array.isArray(st.series.t_s) && st.series.t_s.length;
  }) : [];
  if (steps.length) {
    var palette = ['#1971c2', '#e8590c', '#2f9e44', '#7048e8', '#c2255c', '#0c8599', '#f08c00'];
    var st0 = steps[0].series.t_s;
    var sser = [secs], sdata = [st0];
    steps.forEach(function (st, i) {
      var name = String(st.step || st.name || ('step ' + (i + 1)));
      var col = palette[i % palette.length];
      var n = st.series.responses || [];
      sser.push({ label: name + ' p99', stroke: col, width: 2, scale: 'y',
        value: function (u, v) { return fmtUs(v); } });
      sdata.push(st0.map(function (t, k) { return n[k] ? num(st.series.p99_us[k]) : null; }));
      sser.push({ label: name + ' responses/s', stroke: col, width: 1, dash: [2, 3], scale: 'n',
        value: function (u, v) { return fmtNum(v); } });
      sdata.push(st0.map(function (t, k) { return num(n[k]); }));
    });
    make('chart-steps', {
      scales: { x: { time: false }, y: { range: fromZero }, n: { range: fromZero } },
      series: sser,
      axes: [xAxis, { scale: 'y', label: 'p99 latency', size: 70,
        values: function (u, s) { return s.map(fmtUs); } },
        { scale: 'n', side: 1, label: 'responses / s', size: 60, grid: { show: false },
          values: function (u, s) { return s.map(fmtNum); } }]
    }, sdata, true);
  }

  /* ---- the watched processes (--watch) and squall itself, per second ---- */
  function sub(k, f) {
    return rows.map(function (r) {
      var o = r[k];
      return o && typeof o === 'object' ? f(o, r) : null;
    });
  }
  function len(r) { return num(r.len_s) || 1; }
  function pct(v) { return v == null ? '' : fmtNum(v) + '%'; }
  function mb(v) { return v == null ? '' : fmtNum(v) + ' MB'; }
  C.cpu = '#e8590c'; C.rss = '#0c8599'; C.thr = '#7048e8'; C.fds = '#868e96'; C.lag = '#c92a2a';

  if (rows.length) {
    make('chart-server', {
      scales: { x: { time: false }, y: { range: fromZero }, c: { range: fromZero } },
      series: [secs,
        { label: 'completed/s', stroke: C.rps, width: 2, scale: 'y',
          value: function (u, v) { return fmtNum(v); } },
        { label: 'server CPU', stroke: C.cpu, width: 2, scale: 'c',
          value: function (u, v) { return pct(v); } }],
      axes: [xAxis,
        { scale: 'y', label: 'requests / s', size: 70, values: function (u, s) { return s.map(fmtNum); } },
        { scale: 'c', side: 1, label: 'CPU (% of one core)', size: 60, grid: { show: false },
          values: function (u, s) { return s.map(pct); } }]
    }, [t, rps, sub('server', function (o, r) {
      var c = (num(o.cpu_user_s) || 0) + (num(o.cpu_sys_s) || 0);
      return 100 * c / len(r);
    })], true);

    make('chart-server-mem', {
      scales: { x: { time: false }, m: { range: fromZero }, n: { range: fromZero } },
      series: [secs,
        { label: 'RSS', stroke: C.rss, width: 2, scale: 'm', value: function (u, v) { return mb(v); } },
        { label: 'threads', stroke: C.thr, width: 2, scale: 'n', dash: [6, 4] },
        { label: 'open files', stroke: C.fds, width: 1, scale: 'n', dash: [2, 3] }],
      axes: [xAxis,
        { scale: 'm', label: 'RSS (MB)', size: 70, values: function (u, s) { return s.map(fmtNum); } },
        { scale: 'n', side: 1, label: 'threads · open files', size: 60, grid: { show: false },
          values: function (u, s) { return s.map(fmtNum); } }]
    }, [t, sub('server', function (o) { return num(o.rss_bytes) == null ? null : o.rss_bytes / 1e6; }),
      sub('server', function (o) { return num(o.threads); }),
      sub('server', function (o) { return num(o.fds); })], true);

    make('chart-client', {
      scales: { x: { time: false }, p: { range: function (u, min, max) { return [0, Math.max(100, max * 1.08)]; } },
        l: { range: fromZero } },
      series: [secs,
        { label: 'busiest worker busy', stroke: C.max, width: 2, scale: 'p',
          value: function (u, v) { return pct(v); } },
        { label: 'squall CPU', stroke: C.cpu, width: 2, scale: 'p', dash: [6, 4],
          value: function (u, v) { return pct(v); } },
        { label: 'tick lag', stroke: C.thr, width: 1, scale: 'l', dash: [2, 3],
          value: function (u, v) { return v == null ? '' : fmtUs(v * 1000); } }],
      axes: [xAxis,
        { scale: 'p', label: '% (100 = one core)', size: 70, values: function (u, s) { return s.map(pct); } },
        { scale: 'l', side: 1, label: 'tick lag', size: 60, grid: { show: false },
          values: function (u, s) { return s.map(function (v) { return fmtUs(v * 1000); }); } }]
    }, [t, sub('client', function (o) { return num(o.busy_max) == null ? null : 100 * o.busy_max; }),
      sub('client', function (o, r) { return num(o.cpu_s) == null ? null : 100 * o.cpu_s / len(r); }),
      sub('client', function (o) { return num(o.loop_lag_ms); })], true);
  }

  /* ---- the latency distribution: HdrHistogram's percentile plot ---- */
  var hdr = island.hdr;
  if (hdr && Array.isArray(hdr.x) && hdr.x.length) {
    var ser = [{ label: 'percentile', value: function (u, v) { return pctLabel(v); } },
      { label: hdr.corrected_label || 'latency', stroke: C.corrected, width: 2,
        value: function (u, v) { return fmtUs(v); } }];
    var data = [hdr.x, hdr.corrected];
    if (Array.isArray(hdr.uncorrected)) {
      ser.push({ label: hdr.uncorrected_label || 'uncorrected', stroke: C.uncorrected, width: 2,
        dash: [6, 4], value: function (u, v) { return fmtUs(v); } });
      data.push(hdr.uncorrected);
    }
    make('chart-hdr', {
      padding: [16, 28, 0, 0], /* room for the last tick's label */
      scales: { x: { time: false, distr: 3, log: 10 }, y: { range: fromZero } },
      series: ser,
      axes: [
        { label: 'percentile (log scale of 1/(1-p))',
          splits: function (u, i, min, max) {
            var s = [];
            for (var x = 1; x <= max * 1.0001; x *= 10) if (x >= min * 0.9999) s.push(x);
            return s;
          },
          values: function (u, s) { return s.map(pctLabel); } },
        { label: 'latency', size: 70, values: function (u, s) { return s.map(fmtUs); } }]
    }, data);
  }

  /* ---- status classes ---- */
  var classes = ['1xx', '2xx', '3xx', '4xx', '5xx', 'other'];
  var st = doc.status && typeof doc.status === 'object' ? doc.status : {};
  make('chart-status', {
    height: 240,
    scales: { x: { time: false, auto: false, range: [-0.5, classes.length - 0.5] },
      y: { range: fromZero } },
    series: [{ label: 'class', value: function (u, v) { return v == null ? '' : classes[v]; } },
      { label: 'responses', stroke: C.bar, fill: C.bar, width: 0,
        paths: uPlot.paths.bars({ size: [0.6, 90] }), points: { show: false },
        value: function (u, v) { return fmtNum(v); } }],
    axes: [{ splits: function () { return classes.map(function (c, i) { return i; }); },
      values: function (u, s) { return s.map(function (i) { return classes[i] || ''; }); },
      grid: { show: false } },
    { size: 70, values: function (u, s) { return s.map(fmtNum); } }]
  }, [classes.map(function (c, i) { return i; }),
    classes.map(function (c) { return num(st[c]) || 0; })]);

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
