// The browser side of render.mjs: draws the panels that render.mjs queried (window.TLT_DATA) with
// Chart.js, laid out in the dashboard's gridPos grid, and resolves window.__tltRendered with a
// per-panel report of what was drawn (series, finite points, share of coloured pixels in the plot
// area, stat values shown). render.mjs inlines this file and Chart.js into one offline HTML page.
/* global Chart */
(function () {
  'use strict';
  const D = window.TLT_DATA;

  const THEMES = {
    dark: {
      page: '#111217', panel: '#181b1f', border: 'rgba(204, 204, 220, 0.12)', text: '#ccccdc',
      muted: '#8e8e9a', grid: 'rgba(204, 204, 220, 0.09)', title: '#d8d9da', warn: '#f5b73d',
      err: '#f2495c', track: 'rgba(204, 204, 220, 0.06)', hatch: 'rgba(245, 183, 61, 0.06)',
    },
    light: {
      page: '#f4f5f5', panel: '#ffffff', border: 'rgba(36, 41, 46, 0.14)', text: '#24292e',
      muted: '#6a6e75', grid: 'rgba(36, 41, 46, 0.10)', title: '#24292e', warn: '#b36b00',
      err: '#c4162a', track: 'rgba(36, 41, 46, 0.06)', hatch: 'rgba(179, 107, 0, 0.07)',
    },
  };
  const T = THEMES[D.theme] || THEMES.dark;
  // Grafana's palette-classic and its named colours.
  const PALETTE = ['#7EB26D', '#EAB839', '#6ED0E0', '#EF843C', '#E24D42', '#1F78C1', '#BA43A9',
    '#705DA0', '#508642', '#CCA300', '#447EBC', '#C15C17', '#890F02', '#0A437C', '#6D1F62', '#584477'];
  const NAMED = {
    green: '#73BF69', 'semi-dark-green': '#56A64B', 'dark-green': '#37872D', 'light-green': '#96D98D',
    red: '#F2495C', 'semi-dark-red': '#E02F44', 'dark-red': '#C4162A', 'light-red': '#FF7383',
    blue: '#5794F2', 'semi-dark-blue': '#3274D9', 'dark-blue': '#1F60C4', 'light-blue': '#8AB8FF',
    yellow: '#FADE2A', 'semi-dark-yellow': '#F2CC0C', 'dark-yellow': '#E0B400', 'light-yellow': '#FFEE52',
    orange: '#FF9830', 'semi-dark-orange': '#FF780A', 'dark-orange': '#FA6400', 'light-orange': '#FFB357',
    purple: '#B877D9', 'semi-dark-purple': '#A352CC', 'dark-purple': '#8F3BB8', 'light-purple': '#CA95E5',
    transparent: 'rgba(0, 0, 0, 0)', text: T.text,
  };
  const color = (c) => (c == null ? null : NAMED[c] || c);
  function alpha(c, a) {
    const m = /^#([0-9a-f]{6})$/i.exec(c);
    if (!m) return c;
    const n = parseInt(m[1], 16);
    return `rgba(${n >> 16}, ${(n >> 8) & 255}, ${n & 255}, ${a})`;
  }

  // ---- numbers and units (a subset of Grafana's value formats) --------------------------------
  function fixed(v, decimals) {
    if (!Number.isFinite(v)) return String(v);
    if (decimals != null) return v.toFixed(decimals);
    const a = Math.abs(v);
    const d = a === 0 || a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : Math.min(8, 2 - Math.floor(Math.log10(a)));
    return String(parseFloat(v.toFixed(d)));
  }
  function scaled(v, decimals, factor, suffixes) {
    let i = 0;
    while (Math.abs(v) >= factor && i < suffixes.length - 1) { v /= factor; i++; }
    return fixed(v, decimals) + suffixes[i];
  }
  function seconds(v, decimals) {
    const a = Math.abs(v);
    if (a === 0) return '0 s';
    if (a < 1e-6) return fixed(v * 1e9, decimals) + ' ns';
    if (a < 1e-3) return fixed(v * 1e6, decimals) + ' µs';
    if (a < 1) return fixed(v * 1e3, decimals) + ' ms';
    if (a < 60) return fixed(v, decimals) + ' s';
    if (a < 3600) return fixed(v / 60, decimals) + ' min';
    if (a < 86400) return fixed(v / 3600, decimals) + ' hour';
    if (a < 604800) return fixed(v / 86400, decimals) + ' day';
    return fixed(v / 604800, decimals) + ' week';
  }
  function format(v, unit, decimals) {
    if (v == null) return '–';
    if (Number.isNaN(v)) return 'NaN';
    if (!Number.isFinite(v)) return v > 0 ? '+Inf' : '-Inf';
    switch (unit || 'none') {
      case 'none': return fixed(v, decimals);
      case 'short': return scaled(v, decimals, 1000, ['', ' K', ' Mil', ' Bil', ' Tri']);
      case 'percent': return fixed(v, decimals) + '%';
      case 'percentunit': return fixed(v * 100, decimals) + '%';
      case 's': return seconds(v, decimals);
      case 'ms': return seconds(v / 1e3, decimals);
      case 'µs': return seconds(v / 1e6, decimals);
      case 'ns': return seconds(v / 1e9, decimals);
      case 'bytes': return scaled(v, decimals, 1024, [' B', ' KiB', ' MiB', ' GiB', ' TiB', ' PiB']);
      case 'decbytes': return scaled(v, decimals, 1000, [' B', ' kB', ' MB', ' GB', ' TB', ' PB']);
      case 'Bps': return scaled(v, decimals, 1024, [' B/s', ' KiB/s', ' MiB/s', ' GiB/s', ' TiB/s']);
      case 'ops': return scaled(v, decimals, 1000, [' ops/s', ' K ops/s', ' Mil ops/s', ' Bil ops/s']);
      case 'reqps': return scaled(v, decimals, 1000, [' req/s', ' K req/s', ' Mil req/s']);
      default:
        if (unit.startsWith('suffix:')) return fixed(v, decimals) + unit.slice(7);
        if (unit.startsWith('prefix:')) return unit.slice(7) + fixed(v, decimals);
        return fixed(v, decimals) + ' ' + unit;
    }
  }

  // ---- time axis ---------------------------------------------------------------------------------
  const STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200,
    86400, 172800, 604800].map((s) => s * 1000);
  function timeTicks(from, to, px) {
    const want = Math.max(2, Math.floor(px / 80));
    const step = STEPS.find((s) => (to - from) / s <= want) || STEPS[STEPS.length - 1];
    const off = D.tzOffsetMs;  // align ticks to the display time zone's midnight
    const ticks = [];
    for (let t = Math.ceil((from + off) / step) * step - off; t <= to; t += step) ticks.push(t);
    return { ticks, step };
  }
  function timeLabel(t, step) {
    const opts = { timeZone: D.timezone, hour12: false, hour: '2-digit', minute: '2-digit' };
    if (step < 60000) opts.second = '2-digit';
    if (step >= 86400000) return new Intl.DateTimeFormat('en-CA', { timeZone: D.timezone, month: '2-digit', day: '2-digit' }).format(t);
    return new Intl.DateTimeFormat('en-GB', opts).format(t);
  }
  function timeScale(width) {
    const { ticks, step } = timeTicks(D.from, D.to, width);
    return {
      type: 'linear', min: D.from, max: D.to,
      afterBuildTicks: (s) => { s.ticks = ticks.map((value) => ({ value })); },
      ticks: { callback: (v) => timeLabel(v, step), maxRotation: 0, autoSkip: false, color: T.muted },
      grid: { color: T.grid, drawTicks: false }, border: { color: T.border },
    };
  }

  // ---- field config ---------------------------------------------------------------------------------
  function thresholdColor(steps, v) {
    let c = steps && steps.length ? steps[0].color : 'green';
    for (const s of steps || []) if (s.value != null && v >= s.value) c = s.color;
    return color(c);
  }
  function seriesConfig(panel, s, i) {
    // defaults, then the overrides that match (byName, byRegexp, byFrameRefID)
    const d = (panel.fieldConfig && panel.fieldConfig.defaults) || {};
    const c = { unit: d.unit, decimals: d.decimals, displayName: null, custom: { ...(d.custom || {}) },
      color: d.color || { mode: 'palette-classic' } };
    for (const o of (panel.fieldConfig && panel.fieldConfig.overrides) || []) {
      const m = o.matcher || {};
      const hit = (m.id === 'byName' && m.options === s.name) ||
        (m.id === 'byRegexp' && new RegExp(m.options).test(s.name)) ||
        (m.id === 'byFrameRefID' && m.options === s.refId);
      if (!hit) continue;
      for (const p of o.properties || []) {
        if (p.id === 'color') c.color = p.value;
        else if (p.id === 'unit' || p.id === 'decimals' || p.id === 'displayName') c[p.id] = p.value;
        else if (p.id.startsWith('custom.')) c.custom[p.id.slice(7)] = p.value;
      }
    }
    if (c.color.mode === 'fixed') c.hex = color(c.color.fixedColor);
    else if (c.color.mode === 'thresholds') c.hex = thresholdColor((d.thresholds || {}).steps, lastNotNull(s));
    else c.hex = PALETTE[i % PALETTE.length];
    return c;
  }
  function finite(s) { return s.points.filter((p) => p[1] != null); }
  function lastNotNull(s) { const f = finite(s); return f.length ? f[f.length - 1][1] : null; }
  function reduce(s, calc) {
    const v = finite(s).map((p) => p[1]);
    if (!v.length) return s.nan ? NaN : null;
    switch (calc) {
      case 'mean': return v.reduce((a, b) => a + b, 0) / v.length;
      case 'max': return Math.max(...v);
      case 'min': return Math.min(...v);
      case 'sum': return v.reduce((a, b) => a + b, 0);
      case 'first': case 'firstNotNull': return v[0];
      case 'count': return v.length;
      case 'delta': case 'diff': return v[v.length - 1] - v[0];
      default: return v[v.length - 1];  // last, lastNotNull
    }
  }
  const CALC_NAMES = { lastNotNull: 'last', last: 'last', mean: 'mean', max: 'max', min: 'min', sum: 'total', firstNotNull: 'first', first: 'first' };

  // ---- page skeleton -----------------------------------------------------------------------------
  const css = `
    * { box-sizing: border-box; }
    html, body { margin: 0; background: ${T.page}; color: ${T.text};
      font: 13px ${D.font}; -webkit-font-smoothing: antialiased; }
    .head { position: absolute; left: ${D.layout.pad}px; right: ${D.layout.pad}px; top: 0;
      height: ${D.layout.headerH}px; display: flex; align-items: center; justify-content: space-between; }
    .head h1 { font-size: 22px; font-weight: 600; margin: 0; color: ${T.title}; }
    .head .meta { text-align: right; color: ${T.muted}; font-size: 13px; line-height: 1.5; }
    .head .meta b { color: ${T.text}; font-weight: 500; }
    .panel { position: absolute; background: ${T.panel}; border: 1px solid ${T.border}; border-radius: 3px;
      overflow: hidden; }
    .panel .title { height: ${D.layout.titleH}px; padding: 0 10px; display: flex; align-items: center; gap: 8px;
      font-size: 14px; font-weight: 500; color: ${T.title}; white-space: nowrap; }
    .panel .title span.t { overflow: hidden; text-overflow: ellipsis; }
    .badge { font-size: 11px; font-weight: 600; letter-spacing: 0.04em; padding: 1px 6px; border-radius: 2px;
      border: 1px solid currentColor; }
    .badge.nodata { color: ${T.warn}; } .badge.err { color: ${T.err}; }
    .body { position: absolute; left: 0; right: 0; bottom: 0; top: ${D.layout.titleH}px; }
    .nodata-body { display: flex; flex-direction: column; align-items: center; justify-content: center;
      color: ${T.warn}; background: repeating-linear-gradient(135deg, ${T.hatch} 0 10px, transparent 10px 20px); }
    .nodata-body .big { font-size: 20px; font-weight: 600; }
    .nodata-body .why, .err-body .why { font-size: 12px; color: ${T.muted}; margin-top: 6px; max-width: 90%;
      text-align: center; overflow: hidden; }
    .err-body { display: flex; flex-direction: column; align-items: center; justify-content: center; color: ${T.err}; }
    .row { position: absolute; display: flex; align-items: flex-end; padding: 0 2px 4px;
      font-size: 16px; font-weight: 600; color: ${T.title}; border-bottom: 1px solid ${T.border}; }
    .stat { display: flex; width: 100%; height: 100%; padding: 4px 8px 8px; gap: 8px; }
    .stat .cell { flex: 1; display: flex; flex-direction: column; align-items: center; justify-content: center;
      min-width: 0; border-radius: 2px; }
    .stat .name { font-size: 13px; color: ${T.muted}; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; max-width: 100%; }
    .stat .value { font-weight: 500; white-space: nowrap; line-height: 1.1; }
  `;
  const style = document.createElement('style');
  style.textContent = css;
  document.head.appendChild(style);
  document.body.style.width = D.width + 'px';
  document.body.style.height = D.height + 'px';

  const head = document.createElement('div');
  head.className = 'head';
  const h1 = document.createElement('h1');
  h1.textContent = D.title;
  const meta = document.createElement('div');
  meta.className = 'meta';
  meta.innerHTML = `<div><b></b></div><div></div>`;
  meta.children[0].firstChild.textContent = D.rangeText;
  meta.children[1].textContent = D.varsText;
  head.append(h1, meta);
  document.body.appendChild(head);

  Chart.defaults.font.family = D.font;
  Chart.defaults.font.size = 12;
  Chart.defaults.color = T.text;
  Chart.defaults.borderColor = T.grid;
  Chart.defaults.animation = false;
  Chart.defaults.responsive = false;
  Chart.defaults.maintainAspectRatio = false;
  Chart.defaults.devicePixelRatio = window.devicePixelRatio || 1;
  Chart.defaults.plugins.tooltip.enabled = false;

  // ---- panels ------------------------------------------------------------------------------------------
  const report = [];
  function drawAll() {
    for (const p of D.panels) {
      const r = p.rect;
      if (p.type === 'row') {
        const el = document.createElement('div');
        el.className = 'row';
        Object.assign(el.style, { left: r.x + 'px', top: r.y + 'px', width: r.w + 'px', height: r.h + 'px' });
        el.textContent = p.title + (p.collapsed ? '  (collapsed)' : '');
        document.body.appendChild(el);
        continue;
      }
      const el = document.createElement('div');
      el.className = 'panel';
      el.dataset.panelId = p.id;
      Object.assign(el.style, { left: r.x + 'px', top: r.y + 'px', width: r.w + 'px', height: r.h + 'px' });
      const title = document.createElement('div');
      title.className = 'title';
      const t = document.createElement('span');
      t.className = 't';
      t.textContent = p.title;
      title.appendChild(t);
      const body = document.createElement('div');
      body.className = 'body';
      el.append(title, body);
      document.body.appendChild(el);
      const rep = { id: p.id, title: p.title, type: p.type, rect: r, series: p.series.length,
        points: p.series.reduce((n, s) => n + finite(s).length, 0), noData: p.noData, error: p.errors.length > 0,
        drawn: null, marked: null };
      report.push(rep);

      if (p.errors.length) {
        const b = document.createElement('span');
        b.className = 'badge err';
        b.textContent = 'QUERY ERROR';
        title.appendChild(b);
      }
      if (p.noData) {
        const b = document.createElement('span');
        b.className = 'badge nodata';
        b.textContent = 'NO DATA';
        title.appendChild(b);
        body.classList.add(p.errors.length ? 'err-body' : 'nodata-body');
        body.innerHTML = '<div class="big"></div><div class="why"></div>';
        body.firstChild.textContent = p.errors.length ? 'Query error' : 'No data';
        body.lastChild.textContent = p.errors.length ? p.errors[0]
          : p.series.length ? 'the queries returned only NaN values' : 'the queries returned no series';
        rep.marked = body.firstChild.textContent;
        continue;
      }
      try {
        if (p.type === 'timeseries' || p.type === 'graph') rep.drawn = timeseries(p, body);
        else if (p.type === 'stat' || p.type === 'gauge' || p.type === 'singlestat') rep.drawn = stat(p, body);
        else if (p.type === 'bargauge' || p.type === 'barchart') rep.drawn = bargauge(p, body);
        else if (p.type === 'state-timeline' || p.type === 'status-history') rep.drawn = stateTimeline(p, body);
        else {
          body.classList.add('nodata-body');
          body.innerHTML = '<div class="big"></div>';
          body.firstChild.textContent = `panel type "${p.type}" is not drawn by dashboards/render`;
          rep.marked = 'unsupported';
        }
      } catch (e) {
        body.classList.add('err-body');
        body.textContent = 'render error: ' + e.message;
        rep.marked = 'render error: ' + e.message;
        console.error(`panel ${p.id}: ${e.stack}`);
      }
    }
  }

  function canvasIn(body) {
    const c = document.createElement('canvas');
    const w = body.clientWidth, h = body.clientHeight;
    c.style.width = w + 'px';
    c.style.height = h + 'px';
    c.width = w;
    c.height = h;
    body.appendChild(c);
    return c;
  }
  // Share of the plot area's pixels that are strongly coloured: the series (lines, bars, states);
  // the background, the grid, the axes and light fills are grey or faint.
  function coloured(chart) {
    const a = chart.chartArea, dpr = chart.currentDevicePixelRatio || 1, cv = chart.canvas;
    const x = Math.floor(a.left * dpr), y = Math.max(0, Math.floor((a.top - 3) * dpr));
    const w = Math.max(1, Math.floor((a.right - a.left) * dpr));
    const h = Math.max(1, Math.min(cv.height, Math.ceil((a.bottom + 3) * dpr)) - y);
    const px = chart.ctx.getImageData(x, y, w, h).data;
    let n = 0;
    for (let i = 0; i < px.length; i += 4) {
      if (px[i + 3] < 128) continue;
      const mx = Math.max(px[i], px[i + 1], px[i + 2]), mn = Math.min(px[i], px[i + 1], px[i + 2]);
      if (mx - mn >= 48) n++;
    }
    const box = cv.getBoundingClientRect();  // the plot area in page coordinates, for the test
    const plot = { x: Math.round(box.left + window.scrollX + a.left), y: Math.round(box.top + window.scrollY + a.top - 3),
      w: Math.round(a.right - a.left), h: Math.round(a.bottom - a.top + 6) };
    return { kind: 'pixels', share: n / (w * h), pixels: n, plot };
  }
  function legendOptions(p, labels) {
    const l = (p.options && p.options.legend) || {};
    return {
      display: l.showLegend !== false && l.displayMode !== 'hidden',
      position: l.placement === 'right' ? 'right' : 'bottom', align: 'start',
      labels: { boxWidth: 14, boxHeight: labels === 'box' ? 10 : 3, padding: 10, color: T.text, font: { size: 12 } },
    };
  }

  function timeseries(p, body) {
    const d = (p.fieldConfig && p.fieldConfig.defaults) || {};
    const stacked = ((d.custom || {}).stacking || {}).mode === 'normal' || ((d.custom || {}).stacking || {}).mode === 'percent';
    const calcs = ((p.options || {}).legend || {}).calcs || [];
    const datasets = p.series.map((s, i) => {
      const c = seriesConfig(p, s, i);
      const fillOpacity = c.custom.fillOpacity == null ? 0 : c.custom.fillOpacity;
      const bars = c.custom.drawStyle === 'bars';
      let label = c.displayName || s.name;
      if (calcs.length) label += '   ' + calcs.map((k) => `${CALC_NAMES[k] || k} ${format(reduce(s, k), c.unit, c.decimals)}`).join('  ');
      return {
        type: bars ? 'bar' : 'line', label, data: s.points.map(([x, y]) => ({ x, y })),
        borderColor: c.hex, backgroundColor: fillOpacity > 0 || bars ? alpha(c.hex, bars ? Math.max(fillOpacity, 80) / 100 : fillOpacity / 100) : c.hex,
        // a little wider than Grafana's 1 px, for a picture read at 1600 px; clip: 3 keeps a line
        // on the axis (0 with min 0) visible
        borderWidth: (c.custom.lineWidth == null ? 1 : Math.max(c.custom.lineWidth, 1)) + 0.5, clip: 3,
        pointRadius: c.custom.showPoints === 'always' ? 2.5 : 0, spanGaps: !!c.custom.spanNulls,
        stepped: c.custom.lineInterpolation === 'stepBefore' ? 'before' : c.custom.lineInterpolation === 'stepAfter' ? 'after' : false,
        tension: c.custom.lineInterpolation === 'smooth' ? 0.3 : 0,
        fill: fillOpacity > 0 ? (stacked && i > 0 ? '-1' : 'origin') : false,
        stack: stacked ? 'A' : undefined, barPercentage: 1, categoryPercentage: 0.9,
      };
    });
    // a series that is a single point would be invisible as a line
    for (const ds of datasets) if (ds.data.filter((q) => q.y != null).length === 1) ds.pointRadius = 2.5;
    const unit = d.unit, decimals = d.decimals;
    const steps = ((d.thresholds || {}).steps || []);
    const tmode = ((d.custom || {}).thresholdsStyle || {}).mode || 'off';
    const canvas = canvasIn(body);
    const chart = new Chart(canvas, {
      type: 'line', data: { datasets },
      options: {
        layout: { padding: { left: 4, right: 12, top: 4, bottom: 2 } },
        scales: {
          x: timeScale(canvas.width - 80),
          y: { stacked, min: d.min, max: d.max, grace: d.min == null && d.max == null ? '5%' : 0,
            ticks: { callback: (v) => format(v, unit, decimals), color: T.muted, maxTicksLimit: Math.max(3, Math.floor(canvas.height / 45)) },
            grid: { color: T.grid, drawTicks: false }, border: { display: false } },
        },
        plugins: { legend: legendOptions(p, 'line'), tltThresholds: { steps, mode: tmode } },
      },
      plugins: [thresholdPlugin],
    });
    return coloured(chart);
  }

  const thresholdPlugin = {
    id: 'tltThresholds',
    beforeDatasetsDraw(chart, _args, o) {
      if (!o.steps || !o.steps.length || o.mode === 'off') return;
      const { ctx, chartArea: a, scales: { y } } = chart;
      ctx.save();
      ctx.beginPath();
      ctx.rect(a.left, a.top, a.right - a.left, a.bottom - a.top);
      ctx.clip();
      o.steps.forEach((s, i) => {
        const c = color(s.color);
        if (!c || c === NAMED.transparent) return;
        const lo = s.value == null ? a.bottom : y.getPixelForValue(s.value);
        const next = o.steps[i + 1];
        const hi = next ? y.getPixelForValue(next.value) : a.top;
        if (o.mode.includes('area')) {
          ctx.fillStyle = alpha(c, 0.15);
          ctx.fillRect(a.left, Math.min(lo, hi), a.right - a.left, Math.abs(lo - hi));
        }
        if ((o.mode.includes('line') || o.mode.includes('dashed')) && s.value != null) {
          ctx.strokeStyle = c;
          ctx.setLineDash(o.mode.includes('dashed') ? [6, 4] : []);
          ctx.beginPath();
          ctx.moveTo(a.left, lo);
          ctx.lineTo(a.right, lo);
          ctx.stroke();
        }
      });
      ctx.restore();
    },
  };

  function stat(p, body) {
    const d = (p.fieldConfig && p.fieldConfig.defaults) || {};
    const o = p.options || {};
    const calc = ((o.reduceOptions || {}).calcs || ['lastNotNull'])[0];
    const steps = (d.thresholds || {}).steps;
    const box = document.createElement('div');
    box.className = 'stat';
    body.appendChild(box);
    const vertical = o.orientation === 'vertical' || (o.orientation !== 'horizontal' && body.clientHeight > body.clientWidth * 1.2);
    box.style.flexDirection = vertical ? 'column' : 'row';
    const showName = o.textMode === 'value_and_name' || o.textMode === 'name' || (o.textMode !== 'value' && p.series.length > 1);
    let shown = 0;
    p.series.forEach((s, i) => {
      const c = seriesConfig(p, s, i);
      const v = reduce(s, calc);
      const hex = (d.color || {}).mode === 'thresholds' || !d.color ? thresholdColor(steps, v) : c.hex;
      const cell = document.createElement('div');
      cell.className = 'cell';
      if (o.colorMode === 'background') { cell.style.background = hex; cell.style.color = '#fff'; }
      const text = format(v, c.unit, c.decimals);
      if (showName) {
        const n = document.createElement('div');
        n.className = 'name';
        n.textContent = c.displayName || s.name;
        cell.appendChild(n);
      }
      const val = document.createElement('div');
      val.className = 'value';
      val.textContent = text;
      if (o.colorMode !== 'background' && o.colorMode !== 'none') val.style.color = hex;
      cell.appendChild(val);
      box.appendChild(cell);
      const n = p.series.length;
      const cw = vertical ? body.clientWidth - 16 : (body.clientWidth - 16 - 8 * (n - 1)) / n;
      const ch = (vertical ? (body.clientHeight - 12 - 8 * (n - 1)) / n : body.clientHeight - 12) - (showName ? 18 : 0);
      val.style.fontSize = Math.max(12, Math.min(ch * 0.8, (cw * 0.9) / (0.62 * Math.max(text.length, 2)), 64)) + 'px';
      if (text && text !== '–') shown++;
    });
    return { kind: 'values', values: shown };
  }

  function bargauge(p, body) {
    const d = (p.fieldConfig && p.fieldConfig.defaults) || {};
    const o = p.options || {};
    const calc = ((o.reduceOptions || {}).calcs || ['lastNotNull'])[0];
    const labels = [], values = [], colors = [];
    p.series.forEach((s, i) => {
      const c = seriesConfig(p, s, i);
      labels.push(c.displayName || s.name);
      const v = reduce(s, calc);
      values.push(Number.isFinite(v) ? v : null);
      colors.push((d.color || {}).mode === 'thresholds' ? thresholdColor((d.thresholds || {}).steps, v) : c.hex);
    });
    const horizontal = o.orientation !== 'vertical';
    const canvas = canvasIn(body);
    const valueLabels = {
      id: 'tltValues',
      beforeDatasetsDraw(chart) {  // showUnfilled: the empty rest of each bar, as a track
        if (o.showUnfilled === false) return;
        const { ctx, chartArea: a } = chart;
        ctx.save();
        ctx.fillStyle = T.track;
        for (const bar of chart.getDatasetMeta(0).data) {
          if (horizontal) ctx.fillRect(a.left, bar.y - bar.height / 2, a.right - a.left, bar.height);
          else ctx.fillRect(bar.x - bar.width / 2, a.top, bar.width, a.bottom - a.top);
        }
        ctx.restore();
      },
      afterDatasetsDraw(chart) {
        const { ctx } = chart;
        const meta = chart.getDatasetMeta(0);
        ctx.save();
        ctx.font = `500 13px ${D.font}`;
        ctx.fillStyle = T.text;
        meta.data.forEach((bar, i) => {
          const text = format(values[i], d.unit, d.decimals);
          if (horizontal) { ctx.textAlign = 'left'; ctx.textBaseline = 'middle'; ctx.fillText(text, bar.x + 6, bar.y); }
          else { ctx.textAlign = 'center'; ctx.textBaseline = 'bottom'; ctx.fillText(text, bar.x, bar.y - 4); }
        });
        ctx.restore();
      },
    };
    const gradient = (ctx) => {
      const ch = ctx.chart, a = ch.chartArea, c = colors[ctx.dataIndex];
      if (!a || o.displayMode !== 'gradient') return c;
      const g = horizontal ? ch.ctx.createLinearGradient(a.left, 0, a.right, 0) : ch.ctx.createLinearGradient(0, a.bottom, 0, a.top);
      g.addColorStop(0, alpha(c, 0.35));
      g.addColorStop(1, c);
      return g;
    };
    const max = d.max != null ? d.max : Math.max(0, ...values.filter((v) => v != null)) * 1.12 || 1;
    const chart = new Chart(canvas, {
      type: 'bar',
      data: { labels, datasets: [{ data: values, backgroundColor: gradient, borderWidth: 0, barPercentage: 0.8, categoryPercentage: 0.9 }] },
      options: {
        indexAxis: horizontal ? 'y' : 'x',
        layout: { padding: { left: 6, right: horizontal ? 70 : 8, top: horizontal ? 2 : 20, bottom: 4 } },
        scales: {
          [horizontal ? 'x' : 'y']: { min: d.min != null ? d.min : 0, max, display: false },
          [horizontal ? 'y' : 'x']: { grid: { display: false }, border: { display: false }, ticks: { color: T.text, font: { size: 13 } } },
        },
        plugins: { legend: { display: false } },
      },
      plugins: [valueLabels],
    });
    return coloured(chart);
  }

  function stateTimeline(p, body) {
    const d = (p.fieldConfig && p.fieldConfig.defaults) || {};
    const valueMap = {};
    let idx = 0;
    for (const m of d.mappings || []) {
      if (m.type !== 'value') continue;
      for (const [k, v] of Object.entries(m.options || {})) valueMap[k] = { text: v.text != null ? v.text : k, color: v.color, index: v.index != null ? v.index : idx++ };
    }
    const steps = (d.thresholds || {}).steps || [];
    const stateOf = (v) => {
      const key = String(v);
      const m = valueMap[key];
      const text = m ? m.text : format(v, d.unit, d.decimals);
      let c;
      if (m && m.color) c = color(m.color);
      else if (steps.length > 1) c = thresholdColor(steps, v);
      else c = PALETTE[(m ? m.index : Object.keys(valueMap).length + Math.abs(Math.round(v))) % PALETTE.length];
      return { key: text, text, color: c, order: m ? m.index : 1000 + v };
    };
    const rows = p.series.map((s) => s.name);
    const states = new Map();
    p.series.forEach((s) => {
      let cur = null;
      const pts = s.points;
      pts.forEach(([t, v], i) => {
        const end = i + 1 < pts.length ? pts[i + 1][0] : Math.min(D.to, t + p.stepMs);
        if (v == null) { cur = null; return; }
        const st = stateOf(v);
        if (cur && cur.state === st.key && cur.seg[1] === t) { cur.seg[1] = end; return; }
        if (!states.has(st.key)) states.set(st.key, { ...st, data: [] });
        cur = { state: st.key, seg: [t, end] };
        states.get(st.key).data.push({ x: cur.seg, y: s.name });
      });
    });
    const fill = ((d.custom || {}).fillOpacity == null ? 70 : d.custom.fillOpacity) / 100;
    const datasets = [...states.values()].sort((a, b) => a.order - b.order).map((st) => ({
      label: st.text, data: st.data, backgroundColor: alpha(st.color, fill), borderColor: st.color,
      borderWidth: 0, grouped: false, barPercentage: (p.options || {}).rowHeight || 0.9, categoryPercentage: 1,
    }));
    const canvas = canvasIn(body);
    const chart = new Chart(canvas, {
      type: 'bar', data: { labels: rows, datasets },
      options: {
        indexAxis: 'y',
        layout: { padding: { left: 4, right: 12, top: 4, bottom: 2 } },
        scales: {
          x: timeScale(canvas.width - 160),
          y: { type: 'category', grid: { display: false }, border: { display: false }, ticks: { color: T.text, font: { size: 12 } } },
        },
        plugins: { legend: legendOptions(p, 'box') },
      },
    });
    return coloured(chart);
  }

  drawAll();
  window.__tltReport = report;
  window.__tltRendered = Promise.resolve(report);
})();
