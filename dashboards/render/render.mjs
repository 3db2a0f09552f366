#!/usr/bin/env node
// render.mjs: draws a Grafana dashboard of dashboards/ from a Prometheus's data to a PNG, without
// Grafana: a picture for the README, and a check that the panels' queries find data.
//
// Every panel's PromQL targets go through Prometheus's HTTP API (/api/v1/query_range, or
// /api/v1/query for instant targets) with Grafana's template variables substituted as Grafana's
// Prometheus data source would: $namespace, $job, ... (multi-value or "All" variables become
// regexes for =~), $datasource, $__interval (the range over the panel's width in pixels, rounded
// as Grafana rounds it, at least the scrape interval), $__rate_interval (max($__interval +
// scrape, 4 x scrape), or --rate-interval), $__range. The panels are laid out in the dashboard's
// gridPos grid with their titles, units and legends ({{label}} in legendFormat), drawn with
// Chart.js (timeseries, stat, bargauge, state-timeline) in a page that Debian's headless Chromium
// (/usr/bin/chromium, driven over the DevTools protocol on a pipe) screenshots. Panels without
// data are marked "No data" in the picture and listed on stdout.
//
// Usage (after `npm ci` in dashboards/render, which scripts/setup.sh does):
//   node dashboards/render/render.mjs --prometheus http://127.0.0.1:9090 \
//     [--dashboard dashboards/tlt-idle-gpu-reclamation.json] [--from now-3h] [--to now] \
//     [--var namespace=tlt-test] [--var job=demo-job,other-job] [--scrape-interval 15s] \
//     [--rate-interval 1m] [--width 1600] [--scale 1] [--theme dark|light] [--timezone UTC] \
//     [--out dashboard.png] [--report report.json] [--html page.html] [--require-data] \
//     [--chromium /usr/bin/chromium] [--timeout 60]
//   --from/--to: now, now-15m, now-3h, now-2d, unix seconds or an ISO 8601 time; default: the
//     dashboard's time range. --var NAME=V1,V2 (or =All): a variable's values; an unset variable
//     is All where the variable allows All, else its first value in Prometheus.
//   --report: per-panel JSON (rectangle in the PNG, series, finite points, what was drawn).
// Exit status: 0 the PNG was written; 1 an error (Prometheus unreachable, a query error, no
// browser); 2 with --require-data, a panel had no data (its queries returned no series, or only
// NaN). The PNG is written in cases 1 (query errors) and 2 as well.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');

// ---- command line ---------------------------------------------------------------------------------
function usage(msg) {
  if (msg) process.stderr.write(`render: ${msg}\n`);
  const text = fs.readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n');
  const from = text.findIndex((l) => l.startsWith('// Usage'));
  const to = text.findIndex((l) => l.startsWith('// Exit status'));
  process.stderr.write(text.slice(from, to).map((l) => l.replace(/^\/\/ ?/, '')).join('\n') + '\n');
  process.exit(msg ? 1 : 0);
}
function parseArgs(argv) {
  const o = { dashboard: path.join(REPO, 'dashboards', 'tlt-idle-gpu-reclamation.json'), vars: {},
    scrapeInterval: '15s', width: 1600, scale: 1, theme: 'dark', timezone: 'UTC', out: 'dashboard.png',
    chromium: process.env.CHROMIUM || '/usr/bin/chromium', timeout: 60, requireData: false };
  const names = { '--prometheus': 'prometheus', '--dashboard': 'dashboard', '--from': 'from', '--to': 'to',
    '--scrape-interval': 'scrapeInterval', '--rate-interval': 'rateInterval', '--width': 'width',
    '--scale': 'scale', '--theme': 'theme', '--timezone': 'timezone', '--out': 'out', '--report': 'report',
    '--html': 'html', '--chromium': 'chromium', '--timeout': 'timeout' };
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i], v;
    if (a === '-h' || a === '--help') usage();
    if (a === '--require-data') { o.requireData = true; continue; }
    const eq = a.indexOf('=');
    if (a.startsWith('--') && eq > 0) { v = a.slice(eq + 1); a = a.slice(0, eq); }
    if (a !== '--var' && !names[a]) usage(`unknown argument ${a}`);
    if (v === undefined) { if (i + 1 >= argv.length) usage(`${a} needs a value`); v = argv[++i]; }
    if (a === '--var') {
      const k = v.indexOf('=');
      if (k <= 0) usage(`--var wants NAME=VALUE[,VALUE...], got ${v}`);
      o.vars[v.slice(0, k)] = v.slice(k + 1).split(',');
    } else o[names[a]] = v;
  }
  if (!o.prometheus) usage('--prometheus URL is required');
  o.prometheus = o.prometheus.replace(/\/+$/, '');
  o.width = Number(o.width); o.scale = Number(o.scale); o.timeout = Number(o.timeout);
  if (!(o.width >= 400 && o.width <= 8000)) usage('--width must be within 400..8000');
  if (!(o.scale > 0 && o.scale <= 4)) usage('--scale must be within (0, 4]');
  if (o.theme !== 'dark' && o.theme !== 'light') usage('--theme is dark or light');
  return o;
}

// ---- durations and times -----------------------------------------------------------------------------
const UNIT_MS = { ms: 1, s: 1000, m: 60000, h: 3600000, d: 86400000, w: 604800000, y: 31536000000 };
function durationMs(s) {
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)/gy;
  let total = 0, m, matched = 0;
  while ((m = re.exec(s))) { total += Number(m[1]) * UNIT_MS[m[2]]; matched = re.lastIndex; }
  if (!s || matched !== s.length) throw new Error(`not a duration: ${s}`);
  return total;
}
function promDuration(ms) {  // the largest unit that divides ms: 60000 -> 1m
  for (const u of ['d', 'h', 'm', 's']) if (ms % UNIT_MS[u] === 0) return `${ms / UNIT_MS[u]}${u}`;
  return `${Math.round(ms)}ms`;
}
function parseTime(s, now) {
  if (s === 'now') return now;
  let m = /^now-(.+)$/.exec(s);
  if (m) return now - durationMs(m[1]);
  if (/^\d+(\.\d+)?$/.test(s)) return Number(s) * (s.length > 11 ? 1 : 1000);  // seconds or ms
  const t = Date.parse(s);
  if (Number.isNaN(t)) throw new Error(`not a time: ${s} (now, now-3h, unix seconds, ISO 8601)`);
  return t;
}
// Grafana's kbn.roundInterval.
const ROUND = [[15, 10], [35, 20], [75, 50], [150, 100], [250, 200], [350, 300], [450, 400], [750, 500],
  [1500, 1000], [3500, 2000], [7500, 5000], [12500, 10000], [17500, 15000], [25000, 20000],
  [45000, 30000], [90000, 60000], [210000, 120000], [450000, 300000], [750000, 600000],
  [1050000, 900000], [1500000, 1200000], [2700000, 1800000], [5400000, 3600000], [9000000, 7200000],
  [16200000, 10800000], [32400000, 21600000], [86400000, 43200000], [604800000, 86400000],
  [1814400000, 604800000], [3628800000, 2592000000]];
function roundInterval(ms) {
  for (const [below, r] of ROUND) if (ms < below) return r;
  return 31536000000;
}

// ---- Prometheus ----------------------------------------------------------------------------------------
async function api(base, pathname, params) {
  const url = `${base}${pathname}?${new URLSearchParams(params)}`;
  let r;
  try {
    r = await fetch(url, { signal: AbortSignal.timeout(30000) });
  } catch (e) {
    throw new Error(`GET ${base}${pathname}: ${e.cause ? e.cause.message || e.cause.code : e.message}`);
  }
  let body;
  try { body = await r.json(); } catch { throw new Error(`GET ${url}: HTTP ${r.status}, not JSON`); }
  if (body.status !== 'success') throw new Error(`${body.errorType || 'HTTP ' + r.status}: ${body.error}`);
  return body.data;
}
const promNumber = (v) => (v === '+Inf' ? Infinity : v === '-Inf' ? -Infinity : Number(v));

// ---- template variables -------------------------------------------------------------------------------
// Grafana's Prometheus data source: multi-value/include-All variables are regex-escaped (inside a
// PromQL string, hence the doubled backslashes) and joined as (a|b); the allValue goes in verbatim.
const regexEscape = (v) => v.replace(/\\/g, '\\\\\\\\').replace(/[$^*{}[\]'+?.()|]/g, '\\\\$&');
const plainEscape = (v) => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"');
function formatVar(v) {
  if (v.isAll && v.allValue != null) return v.allValue;
  if (!v.multi && !v.includeAll) return plainEscape(v.values[0] ?? '');
  const e = v.values.map(regexEscape);
  return e.length === 1 ? e[0] : `(${e.join('|')})`;
}
function interpolate(expr, ctx, warn) {
  return expr.replace(/\$\{(\w+)(?::(\w+))?\}|\[\[(\w+)(?::(\w+))?\]\]|\$(\w+)/g, (all, a, fa, b, fb, c) => {
    const name = a || b || c, fmt = fa || fb;
    if (name in ctx.builtins) return ctx.builtins[name];
    const v = ctx.vars[name];
    if (!v) { warn(`unknown template variable $${name} in: ${expr}`); return all; }
    if (fmt === 'raw' || fmt === 'text') return v.values.join(',');
    if (fmt === 'csv') return v.values.join(',');
    if (fmt === 'pipe') return v.values.join('|');
    if (fmt === 'regex') return v.values.length === 1 ? regexEscape(v.values[0]) : `(${v.values.map(regexEscape).join('|')})`;
    return formatVar(v);
  });
}
async function resolveVariables(dash, o, range, warn) {
  const vars = {};
  const rangeS = Math.round((range.to - range.from) / 1000);
  const ctx = { vars, builtins: { __range: `${rangeS}s`, __range_s: String(rangeS), __range_ms: String(rangeS * 1000),
    __rate_interval: '1m', __interval: '1m', __interval_ms: '60000' } };
  for (const t of (dash.templating && dash.templating.list) || []) {
    const v = { name: t.name, multi: !!t.multi, includeAll: !!t.includeAll, allValue: t.allValue, values: [], isAll: false };
    vars[t.name] = v;
    const given = o.vars[t.name];
    if (t.type === 'datasource') { v.values = given || ['prometheus']; continue; }
    if (t.type === 'constant' || t.type === 'textbox') { v.values = given || [String(t.query ?? '')]; continue; }
    let options = null;
    const options_ = async () => {
      if (options) return options;
      if (t.type === 'custom') options = String(t.query || '').split(',').map((s) => s.trim()).filter(Boolean);
      else if (t.type === 'interval') options = String(t.query || '').split(',').map((s) => s.trim()).filter(Boolean);
      else if (t.type === 'query') {
        const q = interpolate(typeof t.query === 'string' ? t.query : (t.query || {}).query || t.definition || '', ctx, warn);
        const m = /^\s*label_values\(\s*(?:(.*),\s*)?([a-zA-Z_]\w*)\s*\)\s*$/.exec(q);
        if (!m) throw new Error(`variable ${t.name}: only label_values() queries are supported, got ${q}`);
        const params = new URLSearchParams({ start: String(range.from / 1000), end: String(range.to / 1000) });
        if (m[1]) params.append('match[]', m[1]);
        options = await api(o.prometheus, `/api/v1/label/${m[2]}/values`, params);
        if (t.regex) { const re = new RegExp(t.regex.replace(/^\/(.*)\/[a-z]*$/, '$1')); options = options.filter((x) => re.test(x)); }
      } else options = [];
      return options;
    };
    if (given && !(given.length === 1 && (given[0] === 'All' || given[0] === '$__all'))) v.values = given;
    else if (given || v.includeAll) {
      if (!v.includeAll) throw new Error(`variable ${t.name} has no All option`);
      v.isAll = true;
      v.values = v.allValue != null ? [v.allValue] : await options_();
      if (v.allValue == null && !v.values.length) warn(`variable ${t.name}: no values in Prometheus`);
    } else {
      const cur = t.current && t.current.value;
      v.values = cur && cur.length ? [].concat(cur) : (await options_()).slice(0, 1);
      if (!v.values.length) warn(`variable ${t.name}: no values in Prometheus`);
    }
  }
  return ctx;
}

// ---- legends -----------------------------------------------------------------------------------------------
function seriesName(metric, legendFormat, expr) {
  if (legendFormat && legendFormat !== '__auto') {
    return legendFormat.replace(/\{\{\s*([a-zA-Z_]\w*)\s*\}\}/g, (_, l) => metric[l] ?? '');
  }
  const labels = Object.entries(metric).filter(([k]) => k !== '__name__');
  const inner = labels.map(([k, v]) => `${k}="${v}"`).join(', ');
  if (metric.__name__) return metric.__name__ + (inner ? `{${inner}}` : '');
  return inner ? `{${inner}}` : expr;
}

// ---- layout (Grafana: 24 columns, 30 px rows, 8 px margins) --------------------------------------------------
const CELL_H = 30, MARGIN = 8, PAD = 16, HEADER_H = 64, TITLE_H = 32;
function flattenPanels(panels) {
  const out = [];
  for (const p of panels || []) {
    out.push(p);
    if (p.type === 'row' && !p.collapsed) for (const q of p.panels || []) out.push(q);  // old-style rows
  }
  return out;
}
function layout(panels, width) {
  const col = (width - 2 * PAD + MARGIN) / 24;
  let bottom = 0;
  for (const p of panels) {
    const g = p.gridPos || { x: 0, y: 0, w: 12, h: 8 };
    p.rect = { x: Math.round(PAD + g.x * col), y: HEADER_H + g.y * (CELL_H + MARGIN),
      w: Math.round(g.w * col - MARGIN), h: g.h * CELL_H + (g.h - 1) * MARGIN };
    bottom = Math.max(bottom, p.rect.y + p.rect.h);
  }
  return bottom + PAD;
}

// ---- queries -------------------------------------------------------------------------------------------------
async function queryPanel(p, o, range, ctx, scrapeMs, warn) {
  const out = { id: p.id, type: p.type, title: p.title || '', gridPos: p.gridPos, rect: p.rect, collapsed: !!p.collapsed,
    fieldConfig: p.fieldConfig || {}, options: p.options || {}, series: [], errors: [], exprs: [] };
  if (p.type === 'row') return out;
  // Grafana: interval = range / maxDataPoints (the panel's width in pixels), rounded, >= min interval.
  const minMs = p.interval ? durationMs(interpolate(p.interval, ctx, warn).replace(/^>/, '')) : scrapeMs;
  const maxPoints = p.maxDataPoints || Math.max(100, p.rect.w);
  const intervalMs = Math.max(roundInterval((range.to - range.from) / maxPoints), minMs);
  const rateMs = o.rateInterval ? durationMs(o.rateInterval) : Math.max(intervalMs + scrapeMs, 4 * scrapeMs);
  const pctx = { vars: ctx.vars, builtins: { ...ctx.builtins, __interval: promDuration(intervalMs),
    __interval_ms: String(intervalMs), __rate_interval: promDuration(rateMs) } };
  let step = intervalMs;
  while ((range.to - range.from) / step > 11000) step *= 2;  // Prometheus's 11,000-point limit
  out.stepMs = step;
  const start = Math.floor(range.from / step) * step, end = Math.ceil(range.to / step) * step;
  await Promise.all((p.targets || []).filter((t) => !t.hide && t.expr).map(async (t) => {
    const expr = interpolate(t.expr, pctx, warn);
    out.exprs.push(expr);
    const instant = t.instant === true && t.range !== true;
    try {
      if (instant) {
        const data = await api(o.prometheus, '/api/v1/query', { query: expr, time: String(range.to / 1000) });
        const rows = data.resultType === 'scalar' ? [{ metric: {}, value: data.result }] : data.result;
        for (const r of rows) {
          const v = promNumber(r.value[1]);
          out.series.push({ refId: t.refId, labels: r.metric, name: seriesName(r.metric, t.legendFormat, expr),
            points: [[r.value[0] * 1000, Number.isFinite(v) ? v : null]], nan: !Number.isFinite(v) });
        }
      } else {
        const data = await api(o.prometheus, '/api/v1/query_range', { query: expr, start: String(start / 1000),
          end: String(end / 1000), step: String(step / 1000) });
        for (const r of data.result) {
          // one point per step, null where Prometheus has none (a gap in the line)
          const byT = new Map(r.values.map(([ts, v]) => [Math.round(ts * 1000), promNumber(v)]));
          const points = [];
          let nan = false;
          for (let ts = start; ts <= end; ts += step) {
            const v = byT.get(ts);
            if (v !== undefined && !Number.isFinite(v)) nan = true;
            points.push([ts, v !== undefined && Number.isFinite(v) ? v : null]);
          }
          out.series.push({ refId: t.refId, labels: r.metric, name: seriesName(r.metric, t.legendFormat, expr), points, nan });
        }
      }
    } catch (e) {
      out.errors.push(`${t.refId || 'query'}: ${e.message}`);
    }
  }));
  const order = new Map((p.targets || []).map((t, i) => [t.refId, i]));
  out.series.sort((a, b) => (order.get(a.refId) ?? 0) - (order.get(b.refId) ?? 0) || a.name.localeCompare(b.name));
  out.points = out.series.reduce((n, s) => n + s.points.filter((q) => q[1] != null).length, 0);
  out.noData = out.points === 0;
  return out;
}

// ---- headless Chromium over the DevTools protocol (--remote-debugging-pipe: fds 3 and 4) -----------
class Cdp {
  constructor(w, r) {
    this.w = w; this.id = 0; this.pending = new Map(); this.listeners = new Set();
    let buf = Buffer.alloc(0);
    r.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      let i;
      while ((i = buf.indexOf(0)) >= 0) {
        const msg = JSON.parse(buf.subarray(0, i).toString('utf8'));
        buf = buf.subarray(i + 1);
        if (msg.id && this.pending.has(msg.id)) {
          const p = this.pending.get(msg.id);
          this.pending.delete(msg.id);
          if (msg.error) p.reject(new Error(`${p.method}: ${msg.error.message}`)); else p.resolve(msg.result);
        } else for (const l of this.listeners) l(msg);
      }
    });
  }
  send(method, params = {}, sessionId) {
    const id = ++this.id;
    this.w.write(JSON.stringify(sessionId ? { id, method, params, sessionId } : { id, method, params }) + '\0');
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject, method }));
  }
  once(pred) {
    return new Promise((resolve) => {
      const l = (m) => { if (pred(m)) { this.listeners.delete(l); resolve(m); } };
      this.listeners.add(l);
    });
  }
  failAll(err) { for (const p of this.pending.values()) p.reject(err); this.pending.clear(); }
}

async function screenshot(o, htmlPath, width, height) {
  if (!fs.existsSync(o.chromium)) {
    throw new Error(`no browser at ${o.chromium}: install Debian's chromium (scripts/setup.sh) or pass --chromium`);
  }
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'tlt-render-chromium-'));
  const args = ['--headless', '--remote-debugging-pipe', `--user-data-dir=${profile}`, '--no-first-run',
    '--no-default-browser-check', '--disable-gpu', '--disable-extensions', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--mute-audio', '--hide-scrollbars',
    '--force-color-profile=srgb', '--disable-dev-shm-usage', 'about:blank'];
  if (process.getuid && process.getuid() === 0) args.unshift('--no-sandbox');  // Chromium refuses root otherwise
  const proc = spawn(o.chromium, args, { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'], detached: true });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr = (stderr + d).slice(-4000); });
  const cdp = new Cdp(proc.stdio[3], proc.stdio[4]);
  const exited = new Promise((resolve) => proc.on('exit', (code, sig) => {
    cdp.failAll(new Error(`chromium exited (${sig || code}): ${stderr.trim().split('\n').slice(-3).join(' | ')}`));
    resolve();
  }));
  proc.on('error', (e) => cdp.failAll(e));
  const kill = () => { try { process.kill(-proc.pid, 'SIGKILL'); } catch { /* gone */ } };
  const timer = setTimeout(() => { cdp.failAll(new Error(`chromium timed out after ${o.timeout} s`)); kill(); }, o.timeout * 1000);
  const pageErrors = [];
  try {
    const { targetId } = await cdp.send('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
    cdp.listeners.add((m) => {
      if (m.sessionId !== sessionId) return;
      if (m.method === 'Runtime.exceptionThrown') {
        const d = m.params.exceptionDetails;
        pageErrors.push((d.exception && d.exception.description) || d.text);
      } else if (m.method === 'Runtime.consoleAPICalled' && (m.params.type === 'error' || m.params.type === 'warning')) {
        process.stderr.write(`render: page: ${m.params.args.map((a) => a.value ?? a.description).join(' ')}\n`);
      }
    });
    await cdp.send('Runtime.enable', {}, sessionId);
    await cdp.send('Page.enable', {}, sessionId);
    await cdp.send('Emulation.setDeviceMetricsOverride', { width, height, deviceScaleFactor: o.scale, mobile: false }, sessionId);
    const loaded = cdp.once((m) => m.sessionId === sessionId && m.method === 'Page.loadEventFired');
    const nav = await cdp.send('Page.navigate', { url: 'file://' + htmlPath }, sessionId);
    if (nav.errorText) throw new Error(`chromium could not open ${htmlPath}: ${nav.errorText}`);
    await loaded;
    const ev = await cdp.send('Runtime.evaluate', { expression: 'window.__tltRendered', awaitPromise: true, returnByValue: true }, sessionId);
    if (ev.exceptionDetails || pageErrors.length) {
      const d = ev.exceptionDetails;
      throw new Error(`the page failed: ${pageErrors.concat(d ? [(d.exception && d.exception.description) || d.text] : []).join('; ')}`);
    }
    const shot = await cdp.send('Page.captureScreenshot', { format: 'png', clip: { x: 0, y: 0, width, height, scale: 1 } }, sessionId);
    await cdp.send('Browser.close').catch(() => {});
    return { png: Buffer.from(shot.data, 'base64'), report: ev.result.value };
  } finally {
    clearTimeout(timer);
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    kill();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

// ---- main ------------------------------------------------------------------------------------------------------------
async function main() {
  const o = parseArgs(process.argv.slice(2));
  const warnings = [];
  const warn = (m) => { if (!warnings.includes(m)) { warnings.push(m); process.stderr.write(`render: warning: ${m}\n`); } };
  const dash = JSON.parse(fs.readFileSync(o.dashboard, 'utf8'));
  const now = Date.now();
  const range = { from: parseTime(o.from || (dash.time || {}).from || 'now-6h', now),
    to: parseTime(o.to || (dash.time || {}).to || 'now', now) };
  if (!(range.to > range.from)) throw new Error('--from must be before --to');
  const scrapeMs = durationMs(o.scrapeInterval);
  await api(o.prometheus, '/api/v1/status/buildinfo', {}).catch((e) => { throw new Error(`Prometheus at ${o.prometheus}: ${e.message}`); });
  const ctx = await resolveVariables(dash, o, range, warn);

  const panels = flattenPanels(dash.panels);
  const height = layout(panels, o.width);
  const data = await Promise.all(panels.map((p) => queryPanel(p, o, range, ctx, scrapeMs, warn)));

  const tzOffsetMs = (() => {  // the display time zone's offset now (ticks align to its midnight)
    const parts = Object.fromEntries(new Intl.DateTimeFormat('en-US', { timeZone: o.timezone, hourCycle: 'h23',
      year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit' })
      .formatToParts(range.to).map((x) => [x.type, x.value]));
    const local = Date.UTC(parts.year, parts.month - 1, parts.day, parts.hour, parts.minute, parts.second);
    return local - Math.floor(range.to / 1000) * 1000;
  })();
  const fmt = (t) => new Intl.DateTimeFormat('sv-SE', { timeZone: o.timezone, year: 'numeric', month: '2-digit',
    day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit' }).format(t);
  const varsText = Object.values(ctx.vars).filter((v) => !['datasource'].includes(v.name))
    .map((v) => `${v.name} = ${v.isAll ? 'All' : v.values.join(', ')}`).join('   ·   ');
  const page = {
    title: dash.title || path.basename(o.dashboard), theme: o.theme, width: o.width, height,
    from: range.from, to: range.to, timezone: o.timezone, tzOffsetMs,
    rangeText: `${fmt(range.from)} → ${fmt(range.to)} ${o.timezone}`,
    varsText: `${varsText}${varsText ? '   ·   ' : ''}Prometheus data, drawn by dashboards/render`,
    font: '"DejaVu Sans", "Inter", "Helvetica Neue", Arial, sans-serif',
    layout: { pad: PAD, headerH: HEADER_H, titleH: TITLE_H },
    panels: data,
  };
  const json = JSON.stringify(page).replace(/</g, '\\u003c');
  const chartJs = fs.readFileSync(path.join(HERE, 'node_modules', 'chart.js', 'dist', 'chart.umd.min.js'), 'utf8');
  const pageJs = fs.readFileSync(path.join(HERE, 'page.js'), 'utf8');
  const html = `<!doctype html><html><head><meta charset="utf-8"><title>${page.title.replace(/</g, '&lt;')}</title></head>` +
    `<body><script>${chartJs.replace(/<\/script/gi, '<\\/script')}</script><script>window.TLT_DATA = ${json};</script>` +
    `<script>${pageJs}</script></body></html>`;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tlt-render-'));
  const htmlPath = path.join(tmp, 'dashboard.html');
  fs.writeFileSync(htmlPath, html);
  if (o.html) fs.writeFileSync(o.html, html);
  let shot;
  try {
    shot = await screenshot(o, htmlPath, o.width, height);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  fs.writeFileSync(o.out, shot.png);

  // ---- summary -----------------------------------------------------------------------------------------------
  const drawnById = new Map(shot.report.map((r) => [r.id, r]));
  const shown = data.filter((p) => p.type !== 'row');
  const noData = shown.filter((p) => p.noData && !p.errors.length);
  const errors = shown.filter((p) => p.errors.length);
  for (const p of shown) {
    const r = drawnById.get(p.id) || {};
    const what = p.errors.length ? `QUERY ERROR: ${p.errors.join('; ')}`
      : p.noData ? (p.series.length ? 'no data (only NaN values)' : 'no data')
        : `${p.series.length} series, ${p.points} points` + (r.drawn ? (r.drawn.kind === 'pixels'
          ? `, ${(100 * r.drawn.share).toFixed(1)}% of the plot coloured` : `, ${r.drawn.values} values shown`) : '');
    console.log(`render: panel ${p.id} "${p.title}" (${p.type}): ${what}`);
  }
  if (o.report) {
    fs.writeFileSync(o.report, JSON.stringify({
      png: path.resolve(o.out), width: Math.round(o.width * o.scale), height: Math.round(height * o.scale), scale: o.scale,
      dashboard: path.resolve(o.dashboard), from: range.from, to: range.to,
      variables: Object.fromEntries(Object.values(ctx.vars).map((v) => [v.name, v.isAll ? 'All' : v.values])),
      panels: shown.map((p) => ({ id: p.id, title: p.title, type: p.type, rect: p.rect, exprs: p.exprs,
        series: p.series.length, points: p.points, noData: p.noData, errors: p.errors,
        marked: (drawnById.get(p.id) || {}).marked || null, drawn: (drawnById.get(p.id) || {}).drawn || null })),
      warnings,
    }, null, 1));
  }
  console.log(`render: wrote ${o.out} (${Math.round(o.width * o.scale)}x${Math.round(height * o.scale)}): ` +
    `${shown.length} panels, ${shown.length - noData.length - errors.length} with data, ${noData.length} without` +
    (errors.length ? `, ${errors.length} with query errors` : ''));
  if (errors.length) return 1;
  if (o.requireData && noData.length) {
    console.log(`render: --require-data: no data in ${noData.length} panel(s): ` + noData.map((p) => `${p.id} "${p.title}"`).join(', '));
    return 2;
  }
  return 0;
}

main().then((code) => { process.exitCode = code; }, (e) => {
  process.stderr.write(`render: error: ${e.message}\n`);
  process.exitCode = 1;
});
