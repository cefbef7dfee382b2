// neardup review console. A client of the documented JSON API (see
// /openapi.json): nothing here reads data any other way. The page is built
// with DOM calls and textContent only — item ids and content are hostile
// input and must render as text — and the Content-Security-Policy forbids
// inline script and style, so none is used.
'use strict';

(() => {
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const KEY = 'neardup.key';
  const TENANT = 'neardup.tenant';
  const REVIEWER = 'neardup.reviewer';
  const FLAGGED = ['review', 'near_duplicate', 'quarantined'];

  // ---- small DOM helpers -------------------------------------------------

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    setAttrs(e, attrs);
    append(e, children);
    return e;
  }

  function svg(tag, attrs, ...children) {
    const e = document.createElementNS(SVG_NS, tag);
    setAttrs(e, attrs);
    append(e, children);
    return e;
  }

  function setAttrs(e, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.setAttribute('class', v);
      else if (k === 'on') for (const [ev, f] of Object.entries(v)) e.addEventListener(ev, f);
      else if (k === 'text') e.textContent = String(v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
  }

  // Children may be nested arrays, to any depth (a list built with map,
  // each entry a separator and an element): all are flattened, so an
  // array never reaches String() and prints as its elements' text.
  function append(e, children) {
    for (const c of children.flat(Infinity)) {
      if (c === undefined || c === null || c === false) continue;
      e.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
  }

  function clear(e) {
    while (e.firstChild) e.removeChild(e.firstChild);
    return e;
  }

  const $ = (id) => document.getElementById(id);

  function badge(state) {
    return el('span', { class: 'badge ' + String(state).replace(/[^a-z_]/g, '') }, String(state).replace('_', ' '));
  }

  function fmt(x, digits = 2) {
    if (x === null || x === undefined) return '—';
    if (typeof x !== 'number') return String(x);
    if (Number.isInteger(x)) return x.toLocaleString('en-US');
    return x.toFixed(digits);
  }

  function pct(x) {
    return x === null || x === undefined ? '—' : (100 * x).toFixed(1) + ' %';
  }

  function seconds(s) {
    if (s === null || s === undefined) return '—';
    if (s < 1) return (s * 1000).toFixed(0) + ' ms';
    if (s < 120) return s.toFixed(1) + ' s';
    if (s < 7200) return (s / 60).toFixed(1) + ' min';
    return (s / 3600).toFixed(1) + ' h';
  }

  // ---- status line --------------------------------------------------------

  function say(message, ok) {
    const s = $('status');
    s.textContent = message;
    s.className = ok ? 'ok' : '';
    s.hidden = !message;
  }

  // ---- session and routing -----------------------------------------------

  const session = {
    get key() { return sessionStorage.getItem(KEY); },
    get tenant() { return sessionStorage.getItem(TENANT) || ''; },
    get reviewer() { return sessionStorage.getItem(REVIEWER) || ''; },
    set(tenant, key, reviewer) {
      if (key) sessionStorage.setItem(KEY, key);
      sessionStorage.setItem(TENANT, tenant || '');
      if (reviewer !== undefined) sessionStorage.setItem(REVIEWER, reviewer || '');
    },
    clear() {
      for (const k of [KEY, TENANT, REVIEWER, 'neardup.queue']) sessionStorage.removeItem(k);
    },
  };

  // The route lives in the fragment: #tenant=T&view=compare&left=A&right=B.
  // A key in a link is never used: by the time this runs the browser has
  // stored the URL, key and all, in its history and session files. It is
  // dropped from the address bar, and the form asks for the key.
  function route() {
    const p = new URLSearchParams(location.hash.replace(/^#/, ''));
    if (p.has('key')) {
      p.delete('key');
      history.replaceState(null, '', location.pathname + location.search + '#' + p.toString());
      say('A key in a link is not used: browsers keep links in their history. Sign in with the form.');
    } else if (p.has('tenant') && p.get('tenant') !== session.tenant && session.key) {
      session.set(p.get('tenant'), null);
    }
    return p;
  }

  function go(params) {
    const p = new URLSearchParams();
    if (session.tenant) p.set('tenant', session.tenant);
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null) p.set(k, v);
    const hash = '#' + p.toString();
    if (location.hash === hash) render();
    else location.hash = hash;
  }

  // ---- the API ------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, body) {
    const headers = { Authorization: 'Bearer ' + session.key };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), redirect: 'follow', credentials: 'omit', cache: 'no-store' });
    const type = res.headers.get('content-type') || '';
    if (!res.ok) {
      let code = 'http_' + res.status, message = res.statusText;
      if (type.startsWith('application/json')) {
        const e = await res.json().catch(() => null);
        if (e && e.error) ({ code, message } = e.error);
      }
      throw new ApiError(res.status, code, message);
    }
    if (type.startsWith('application/json')) return res.json();
    return res.blob();
  }

  const t = () => encodeURIComponent(session.tenant);
  const id = (s) => encodeURIComponent(s);

  // ---- charts (SVG, drawn here: no library) ------------------------------

  const W = 440, H = 220, M = { l: 52, r: 12, t: 26, b: 44 };

  function frame(title, yTitle, xTitle, yMax, yFormat) {
    const s = svg('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': title });
    s.appendChild(svg('text', { class: 'title', x: M.l, y: 15, text: title }));
    const ih = H - M.t - M.b;
    for (let i = 0; i <= 4; i++) {
      const y = M.t + ih - (ih * i) / 4;
      s.appendChild(svg('line', { class: 'grid', x1: M.l, x2: W - M.r, y1: y, y2: y }));
      s.appendChild(svg('text', { x: M.l - 6, y: y + 4, 'text-anchor': 'end', text: yFormat((yMax * i) / 4) }));
    }
    s.appendChild(svg('line', { class: 'axis', x1: M.l, x2: M.l, y1: M.t, y2: M.t + ih }));
    s.appendChild(svg('line', { class: 'axis', x1: M.l, x2: W - M.r, y1: M.t + ih, y2: M.t + ih }));
    s.appendChild(svg('text', { x: (M.l + W - M.r) / 2, y: H - 4, 'text-anchor': 'middle', text: xTitle }));
    s.appendChild(svg('text', { x: 12, y: M.t + ih / 2, transform: `rotate(-90 12 ${M.t + ih / 2})`, 'text-anchor': 'middle', text: yTitle }));
    return s;
  }

  // bars: [{label, value}]
  // Counts: four whole-number ticks of 1, 2 or 5 × 10^k each.
  function countMax(v) {
    const quarter = Math.max(1, v / 4);
    const p = Math.pow(10, Math.floor(Math.log10(quarter)));
    for (const m of [1, 2, 5, 10]) if (m * p >= quarter) return 4 * m * p;
    return 40 * p;
  }

  function barChart(title, bars, xTitle, yTitle) {
    const max = countMax(Math.max(0, ...bars.map((b) => b.value)));
    const s = frame(title, yTitle, xTitle, max, (v) => fmt(Math.round(v * 100) / 100));
    const iw = W - M.l - M.r, ih = H - M.t - M.b;
    const bw = iw / Math.max(1, bars.length);
    const every = Math.ceil(bars.length / 12);
    bars.forEach((b, i) => {
      const h = (ih * b.value) / max;
      const x = M.l + i * bw;
      s.appendChild(svg('rect', { class: 'bar', x: x + 1, y: M.t + ih - h, width: Math.max(1, bw - 2), height: h, 'data-value': b.value },
        svg('title', { text: `${b.label}: ${fmt(b.value)}` })));
      if (i % every === 0) s.appendChild(svg('text', { x: x + bw / 2, y: M.t + ih + 14, 'text-anchor': 'middle', text: b.label }));
    });
    if (!bars.some((b) => b.value > 0)) s.appendChild(svg('text', { x: M.l + iw / 2, y: M.t + ih / 2, 'text-anchor': 'middle', class: 'empty-note', text: 'no data yet' }));
    return s;
  }

  function histogramBars(h, label) {
    const bars = h.bounds.map((b, i) => ({ label: label(b, i), value: h.counts[i] }));
    if (h.overflow > 0) bars.push({ label: '> ' + label(h.bounds[h.bounds.length - 1], h.bounds.length - 1), value: h.overflow });
    return bars;
  }

  // points: [[x, y]] in [0,1]²; markers: [{x, label, cls}]
  function curveChart(title, points, xTitle, yTitle, markers) {
    const s = frame(title, yTitle, xTitle, 1, (v) => v.toFixed(2));
    const iw = W - M.l - M.r, ih = H - M.t - M.b;
    const X = (x) => M.l + x * iw, Y = (y) => M.t + ih - y * ih;
    for (let i = 0; i <= 4; i++) s.appendChild(svg('text', { x: X(i / 4), y: M.t + ih + 14, 'text-anchor': 'middle', text: (i / 4).toFixed(2) }));
    s.appendChild(svg('path', { class: 'line', d: points.map(([x, y], i) => `${i ? 'L' : 'M'}${X(x).toFixed(1)},${Y(y).toFixed(1)}`).join(' ') }));
    markers.forEach((m, i) => {
      s.appendChild(svg('line', { class: 'marker ' + (m.cls || ''), x1: X(m.x), x2: X(m.x), y1: M.t, y2: M.t + ih }));
      // Labels go left of a line near the right edge, one under the other.
      const left = m.x > 0.6;
      s.appendChild(svg('text', { x: X(m.x) + (left ? -4 : 4), y: M.t + ih - 8 - 13 * i, 'text-anchor': left ? 'end' : 'start', text: m.label }));
    });
    return s;
  }

  // estimates: [{label, value, low, high}] in [0,1]
  function intervalChart(title, estimates) {
    const s = frame(title, 'proportion', '95 % Wilson interval', 1, (v) => v.toFixed(2));
    const iw = W - M.l - M.r, ih = H - M.t - M.b;
    const Y = (y) => M.t + ih - y * ih;
    const bw = iw / Math.max(1, estimates.length);
    estimates.forEach((e, i) => {
      const x = M.l + bw * (i + 0.5);
      s.appendChild(svg('text', { x, y: M.t + ih + 14, 'text-anchor': 'middle', text: e.label }));
      if (e.value === null) {
        s.appendChild(svg('text', { x, y: M.t + ih / 2, 'text-anchor': 'middle', text: 'no labels' }));
        return;
      }
      s.appendChild(svg('line', { class: 'ci', x1: x, x2: x, y1: Y(e.low), y2: Y(e.high) }));
      s.appendChild(svg('line', { class: 'ci', x1: x - 8, x2: x + 8, y1: Y(e.low), y2: Y(e.low) }));
      s.appendChild(svg('line', { class: 'ci', x1: x - 8, x2: x + 8, y1: Y(e.high), y2: Y(e.high) }));
      s.appendChild(svg('circle', { class: 'point', cx: x, cy: Y(e.value), r: 5 }, svg('title', { text: `${e.label} ${pct(e.value)} (${pct(e.low)} – ${pct(e.high)})` })));
      s.appendChild(svg('text', { x: x + 10, y: Y(e.value) + 4, text: pct(e.value) }));
    });
    return s;
  }

  function figure(k, v) {
    return el('div', { class: 'figure' }, el('div', { class: 'v', text: v }), el('div', { class: 'k', text: k }));
  }

  // ---- views --------------------------------------------------------------

  const view = () => $('view');

  function heading(text, ...rest) {
    return el('h1', {}, text, ...rest);
  }

  // Each render bumps this; a view that awaited and finds it changed stops
  // (the person moved on), so it never writes into, or takes the keys of,
  // a later view.
  let generation = 0;
  const stale = (g) => g !== generation;

  // The queue's orders: the server's (newest write first) and by the
  // closest match's score. Items without a verified match go last in both
  // score orders; ties keep the server's order.
  const QUEUE_SORTS = {
    newest: 'newest first',
    'score-desc': 'closest-match score, highest first',
    'score-asc': 'closest-match score, lowest first',
  };

  function queueOrder(sort) {
    const score = (r) => (r.q.closest ? r.q.closest.score : null);
    if (sort === 'newest') return (a, b) => a.n - b.n;
    const dir = sort === 'score-asc' ? 1 : -1;
    return (a, b) => {
      const x = score(a), y = score(b);
      if (x === null || y === null) return (x === null) - (y === null) || a.n - b.n;
      return dir * (x - y) || a.n - b.n;
    };
  }

  async function queueView(p) {
    const states = (p.get('state') || FLAGGED.join(',')).split(',').filter(Boolean);
    const filter = p.get('q') || '';
    let sort = Object.hasOwn(QUEUE_SORTS, p.get('sort')) ? p.get('sort') : 'newest';
    const v = clear(view());
    v.appendChild(heading('Review queue'));
    const boxes = FLAGGED.concat(['duplicate']).map((s) =>
      el('label', {}, el('input', { type: 'checkbox', value: s, checked: states.includes(s), class: 'state-filter' }), s.replace('_', ' ')));
    const search = el('input', { type: 'text', id: 'queue-filter', placeholder: 'item id contains…', value: filter });
    const apply = () => go({ view: 'queue', state: [...v.querySelectorAll('.state-filter:checked')].map((b) => b.value).join(','), q: search.value || undefined, sort: sort === 'newest' ? undefined : sort });
    for (const b of boxes) b.firstChild.addEventListener('change', apply);
    search.addEventListener('change', apply);
    v.appendChild(el('div', { class: 'toolbar' }, boxes, search, el('button', { type: 'button', on: { click: apply } }, 'Refresh')));
    // Sortable columns: a button in the header; aria-sort says the order.
    const sortBy = (next) => {
      sort = next;
      // The order stays in the address (a reload keeps it) without a reload now.
      const q = new URLSearchParams(location.hash.replace(/^#/, ''));
      if (sort === 'newest') q.delete('sort');
      else q.set('sort', sort);
      history.replaceState(null, '', location.pathname + location.search + '#' + q.toString());
      draw();
    };
    const scoreHead = el('th', {}, el('button', { type: 'button', class: 'sort', id: 'queue-sort-score', title: 'Sort by the closest match\'s score',
      on: { click: () => sortBy(sort === 'score-desc' ? 'score-asc' : 'score-desc') } }, 'Score'));
    const newestHead = el('th', {}, el('button', { type: 'button', class: 'sort', id: 'queue-sort-newest', title: 'Sort by log position, newest first',
      on: { click: () => sortBy('newest') } }, 'Log position'));
    const th = (h) => el('th', { text: h });
    const table = el('table', { id: 'queue-table' },
      el('thead', {}, el('tr', {}, th('Item'), th('Closest match'), scoreHead, th('Decision when written'), th('Epoch'), newestHead, th('Labels'), th(''))));
    const body = el('tbody');
    table.appendChild(body);
    const summary = el('p', { class: 'muted', id: 'queue-summary' });
    v.appendChild(summary);
    v.appendChild(table);
    const more = el('button', { type: 'button', id: 'queue-more', hidden: true }, 'Older items');
    v.appendChild(el('div', { class: 'actions' }, more));
    let before;
    let total = 0;
    let loading = false;
    const rows = [];
    const g = generation;
    // Puts the rows in the chosen order; the order a skip follows is the one shown.
    const draw = () => {
      rows.sort(queueOrder(sort));
      for (const r of rows) body.appendChild(r.tr);
      scoreHead.setAttribute('aria-sort', sort === 'score-desc' ? 'descending' : sort === 'score-asc' ? 'ascending' : 'none');
      newestHead.setAttribute('aria-sort', sort === 'newest' ? 'descending' : 'none');
      scoreHead.firstChild.textContent = 'Score' + (sort === 'score-desc' ? ' ↓' : sort === 'score-asc' ? ' ↑' : '');
      newestHead.firstChild.textContent = 'Log position' + (sort === 'newest' ? ' ↓' : '');
      sessionStorage.setItem('neardup.queue', JSON.stringify(rows.map((r) => r.q.item.item_id)));
      summary.textContent = `${fmt(total)} flagged items in these states; ${fmt(rows.length)} shown, ${QUEUE_SORTS[sort]}. Open one to compare it with its closest match.`;
    };
    const load = async () => {
      if (loading) return;
      loading = true;
      more.disabled = true;
      const qs = new URLSearchParams({ state: states.join(','), limit: '100' });
      if (before !== undefined && before !== null) qs.set('before', before);
      let page;
      try {
        page = await api('GET', `/v1/tenants/${t()}/queue?${qs}`);
      } finally {
        loading = false;
        more.disabled = false;
      }
      if (stale(g)) return;
      const nothing = body.querySelector('tr.nothing');
      if (nothing) nothing.remove();
      for (const q of page.items) {
        if (filter && !q.item.item_id.includes(filter)) continue;
        const open = () => go({ view: 'compare', left: q.item.item_id });
        const m = q.closest;
        const tr = el('tr', { class: 'clickable', 'data-item': q.item.item_id, on: { click: open } },
          el('td', { class: 'id', text: q.item.item_id }),
          m ? el('td', { class: 'id closest', 'data-item': m.item_id, text: m.item_id }) : el('td', { class: 'closest muted', text: 'none' }),
          el('td', { class: 'num score', 'data-score': m ? m.score : undefined, title: m ? m.verdict : 'no verified candidate', text: m ? m.score.toFixed(4) : '—' }),
          el('td', {}, badge(q.item.decision)),
          el('td', { text: fmt(q.item.epoch) }),
          el('td', { text: fmt(q.lsn) }),
          el('td', { text: fmt(q.labels) }),
          el('td', {}, el('button', { type: 'button', on: { click: (e) => { e.stopPropagation(); open(); } } }, 'Review')));
        rows.push({ q, tr, n: rows.length });
      }
      total = page.total;
      before = page.next_before;
      more.hidden = before === undefined || before === null;
      draw();
      if (!rows.length && !body.firstChild) body.appendChild(el('tr', { class: 'nothing' }, el('td', { colspan: 8, class: 'empty', text: 'Nothing to review.' })));
    };
    more.addEventListener('click', () => load().catch(fail));
    await load();
  }

  function nextInQueue(current) {
    const order = JSON.parse(sessionStorage.getItem('neardup.queue') || '[]');
    const i = order.indexOf(current);
    return i >= 0 && i + 1 < order.length ? order[i + 1] : null;
  }

  function textOf(side) {
    const box = el('div', { class: 'text' });
    // A tenant that does not retain content: the note says whether the
    // text was read again from its object (an audited read) or why not.
    const note = side.content_note || 'This tenant does not retain content (retain_content: false).';
    if (!side.segments) {
      box.appendChild(el('span', { class: 'muted content-note', text: note }));
      return box;
    }
    if (side.content_note) box.appendChild(el('p', { class: 'muted content-note', text: side.content_note }));
    for (const run of side.segments) box.appendChild(run.shared ? el('mark', { class: 'shared', text: run.text }) : document.createTextNode(run.text));
    return box;
  }

  function sideCard(side, label) {
    const i = side.item;
    return el('div', { class: 'card side', 'data-side': label },
      el('h2', {}, label + ': ', el('span', { class: 'id item-id', text: i.item_id })),
      el('p', { class: 'muted' }, `epoch ${fmt(i.epoch)} · ${fmt(i.tokens)} tokens · ${i.media_type} · decision when written: `, badge(i.decision),
        ' · ', el('a', { href: '#', on: { click: (e) => { e.preventDefault(); go({ view: 'neighbourhood', item: i.item_id }); } } }, 'neighbourhood')),
      textOf(side));
  }

  async function compareView(p) {
    const left = p.get('left');
    const v = clear(view());
    v.appendChild(heading('Compare'));
    if (!left) {
      v.appendChild(el('p', { class: 'empty', text: 'Pick an item from the review queue.' }));
      return;
    }
    const g = generation;
    const cands = await api('GET', `/v1/tenants/${t()}/items/${id(left)}/candidates?limit=10`);
    if (stale(g)) return;
    const right = p.get('right') || (cands.candidates[0] && cands.candidates[0].item_id);
    v.appendChild(el('div', { class: 'card' },
      el('p', {}, 'Decision for ', el('span', { class: 'id', text: left }), ' now: ', badge(cands.decision), ' ', el('span', { class: 'muted', id: 'decision-explanation', text: cands.explanation }))));
    if (!right) {
      v.appendChild(el('p', { class: 'empty', text: 'No verified candidate: nothing to compare it with.' }));
      return;
    }
    const c = await api('POST', `/v1/tenants/${t()}/compare`, { left, right });
    if (stale(g)) return;
    const ver = c.verification;
    const others = cands.candidates.filter((x) => x.item_id !== right);
    v.appendChild(el('div', { class: 'card', id: 'verification' },
      el('div', { class: 'actions' },
        el('span', { class: 'score', id: 'score', text: ver.score.toFixed(4) }),
        badge(ver.verdict),
        el('span', { class: 'muted', text: `exact Jaccard · policy ${ver.policy.id}@v${ver.policy.version}: identical ≥ ${ver.policy.threshold_identical}, similar ≥ ${ver.policy.threshold_similar}` })),
      el('p', { id: 'explanation', text: ver.explanation }),
      others.length ? el('p', { class: 'muted', id: 'other-candidates' }, 'Other candidates: ', ...others.flatMap((o, i) => [i ? ', ' : null,
        el('a', { href: '#', class: 'id other-candidate', 'data-item': o.item_id, on: { click: (e) => { e.preventDefault(); go({ view: 'compare', left, right: o.item_id }); } } }, o.item_id),
        ` (${o.score.toFixed(3)})`])) : null));
    v.appendChild(el('div', { class: 'pair' }, sideCard(c.left, 'Item'), sideCard(c.right, 'Match')));
    const rationale = el('input', { type: 'text', id: 'rationale', placeholder: 'rationale (optional; Enter saves as near duplicate)' });
    const result = el('span', { id: 'label-result', class: 'muted' });
    const labels = el('ul', { id: 'pair-labels' });
    const samePair = (l) => (l.left === left && l.right === right) || (l.left === right && l.right === left);
    const showLabels = (list) => {
      clear(labels);
      const sorted = list.filter(samePair).concat(list.filter((l) => !samePair(l)));
      if (!sorted.length) labels.appendChild(el('li', { class: 'muted', text: 'No label on either item yet.' }));
      for (const l of sorted) {
        labels.appendChild(el('li', { 'data-pair': samePair(l) ? 'this' : 'other' }, badge(l.label),
          samePair(l) ? ' this pair' : [' ', el('span', { class: 'id', text: l.left }), ' / ', el('span', { class: 'id', text: l.right })],
          ` by ${l.actor}`, l.rationale ? ` — “${l.rationale}”` : '',
          el('span', { class: 'muted', text: ` (${new Date(l.recorded_at_ms).toISOString()}, policy ${l.policy_id}@v${l.policy_version})` })));
      }
    };
    showLabels(c.labels);
    let busy = false;
    const label = async (kind) => {
      if (busy) return;
      busy = true;
      try {
        const body = { left, right, label: kind, rationale: rationale.value };
        if (session.reviewer) body.actor = session.reviewer;
        const ev = await api('POST', `/v1/tenants/${t()}/labels`, body);
        result.textContent = `Saved: ${kind.replace('_', ' ')} (label #${ev.seq}).`;
        say('', true);
        c.labels.push(ev);
        showLabels(c.labels);
        rationale.value = '';
      } catch (e) {
        fail(e);
      } finally {
        busy = false;
      }
    };
    const skip = () => {
      const next = nextInQueue(left);
      if (next) go({ view: 'compare', left: next });
      else go({ view: 'queue' });
    };
    v.appendChild(el('div', { class: 'card', id: 'decide' },
      el('h2', { text: 'Your decision' }),
      el('div', { class: 'rationale' }, rationale),
      el('div', { class: 'actions' },
        el('button', { type: 'button', class: 'primary', id: 'btn-duplicate', on: { click: () => label('duplicate') } }, 'Duplicate ', el('kbd', { text: 'd' })),
        el('button', { type: 'button', class: 'primary', id: 'btn-near', on: { click: () => label('near_duplicate') } }, 'Near duplicate ', el('kbd', { text: 'n' })),
        el('button', { type: 'button', id: 'btn-distinct', on: { click: () => label('distinct') } }, 'Distinct ', el('kbd', { text: 'x' })),
        el('button', { type: 'button', id: 'btn-skip', on: { click: skip } }, 'Skip ', el('kbd', { text: 's' })),
        result),
      el('p', { class: 'hint', text: 'Each label is an immutable event with your rationale; it never changes a threshold.' }),
      el('h2', { text: 'Labels on these items' }), labels));
    rationale.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') { e.preventDefault(); label('near_duplicate'); }
      if (e.key === 'Escape') rationale.blur();
    });
    keys = (e) => {
      if (e.target && (e.target.tagName === 'INPUT' || e.target.tagName === 'TEXTAREA')) return;
      // A held key repeats: one press, one label.
      if (e.ctrlKey || e.metaKey || e.altKey || e.repeat) return;
      const k = e.key.toLowerCase();
      if (k === 'd') label('duplicate');
      else if (k === 'n') label('near_duplicate');
      else if (k === 'x') label('distinct');
      else if (k === 's') skip();
      else return;
      e.preventDefault();
    };
  }

  async function neighbourhoodView(p) {
    const item = p.get('item');
    const v = clear(view());
    v.appendChild(heading('Neighbourhood of ', el('span', { class: 'id', text: item || '' })));
    if (!item) return;
    const g = generation;
    const n = await api('GET', `/v1/tenants/${t()}/items/${id(item)}/neighbourhood?max=100`);
    if (stale(g)) return;
    v.appendChild(el('p', { class: 'muted', id: 'neighbourhood-summary',
      text: `${n.members.length} items reachable through ${n.edges.length} verified pairs at or above the similar threshold${n.truncated ? ' (stopped at the limit: the cluster is larger)' : ''}.` }));
    const table = el('table', { id: 'neighbourhood-table' },
      el('thead', {}, el('tr', {}, ['Item', 'Hops', 'Score to the nearer member', ''].map((h) => el('th', { text: h })))));
    const body = el('tbody');
    table.appendChild(body);
    const rows = [{ item_id: item, hops: 0, score: 1 }].concat(n.members);
    for (const m of rows) {
      const tomb = el('button', { type: 'button', class: 'danger', on: { click: () => tombstone(m.item_id).catch(fail) } }, 'Tombstone…');
      body.appendChild(el('tr', { 'data-item': m.item_id },
        el('td', { class: 'id', text: m.item_id }),
        el('td', { text: m.hops }),
        el('td', { text: m.hops ? m.score.toFixed(4) : '—' }),
        el('td', {},
          m.hops ? el('button', { type: 'button', on: { click: () => go({ view: 'compare', left: item, right: m.item_id }) } }, 'Compare') : null, ' ', tomb)));
    }
    v.appendChild(table);
    if (n.members.length) v.appendChild(el('div', { class: 'card' }, el('h2', { text: 'Cluster' }), clusterGraph(item, n)));
  }

  // The item in the middle, its neighbours on rings by hops, verified pairs as lines.
  function clusterGraph(item, n) {
    const size = 420, c = size / 2;
    const rings = new Map();
    for (const m of n.members) {
      if (!rings.has(m.hops)) rings.set(m.hops, []);
      rings.get(m.hops).push(m.item_id);
    }
    const hops = [...rings.keys()].sort((a, b) => a - b);
    const pos = new Map([[item, [c, c]]]);
    hops.forEach((h, ri) => {
      const ids = rings.get(h);
      const r = ((ri + 1) * (c - 60)) / hops.length;
      ids.forEach((id, i) => {
        const a = (2 * Math.PI * i) / ids.length - Math.PI / 3 + ri * 0.4;
        pos.set(id, [c + r * Math.cos(a), c + r * Math.sin(a)]);
      });
    });
    const g = svg('svg', { class: 'graph', viewBox: `0 0 ${size} ${size}`, role: 'img', 'aria-label': 'cluster graph' });
    for (const e of n.edges) {
      const a = pos.get(e.left), b = pos.get(e.right);
      if (!a || !b) continue;
      g.appendChild(svg('line', { class: 'edge', x1: a[0], y1: a[1], x2: b[0], y2: b[1] }, svg('title', { text: `${e.left} – ${e.right}: ${e.score.toFixed(4)}` })));
      g.appendChild(svg('text', { class: 'score', x: (a[0] + b[0]) / 2, y: (a[1] + b[1]) / 2 - 3, 'text-anchor': 'middle', text: e.score.toFixed(2) }));
    }
    for (const [id, [x, y]] of pos) {
      const short = id.length > 24 ? id.slice(0, 23) + '…' : id;
      g.appendChild(svg('circle', { class: 'node' + (id === item ? ' seed' : ''), cx: x, cy: y, r: 7 }, svg('title', { text: id })));
      g.appendChild(svg('text', { x, y: y + 20, 'text-anchor': 'middle', text: short }));
    }
    return g;
  }

  async function tombstone(itemId) {
    const info = await api('GET', `/v1/tenants/${t()}/items/${id(itemId)}`);
    const ok = window.confirm(`Tombstone ${itemId} at epoch ${info.epoch}?\n\nIt stops being a candidate at once; the id can come back only with a higher epoch.`);
    if (!ok) return;
    const r = await api('DELETE', `/v1/tenants/${t()}/items/${id(itemId)}?epoch=${info.epoch}`);
    say(`Tombstoned ${r.item_id} at epoch ${r.epoch} (log position ${r.lsn}).`, true);
    render();
  }

  async function dashboardView() {
    const v = clear(view());
    v.appendChild(heading('Dashboards'));
    const g = generation;
    const d = await api('GET', `/v1/tenants/${t()}/dashboard`);
    if (stale(g)) return;
    const st = d.stats;
    v.appendChild(el('div', { class: 'card' }, el('div', { class: 'figures', id: 'figures' },
      figure('live items', fmt(st.live_items)),
      figure('queries', fmt(st.queries)),
      figure('capped queries', fmt(d.cap_rejections)),
      figure('budget rejections', fmt(d.budget_rejections)),
      figure('rate limited', fmt(d.rate_limited)),
      figure('largest bucket', fmt(st.largest_bucket)),
      figure('index memory', fmt(Math.round(st.resident_bytes_estimate / 1024)) + ' KiB'),
      figure('tombstones', fmt(st.tombstones)),
      figure('snapshot age', seconds(d.snapshot_age_seconds)),
      figure('replication lag', d.replication_lag_commands === null || d.replication_lag_commands === undefined ? 'single node' : fmt(d.replication_lag_commands) + ' commands')),
    el('p', { class: 'hint', text: 'Counts and histograms are this server process\'s since it started; items and buckets are the tenant\'s now.' })));
    const grid = el('div', { class: 'grid', id: 'charts' });
    v.appendChild(grid);
    const card = (...c) => grid.appendChild(el('div', { class: 'card' }, ...c));
    const lab = d.labelled;
    card(intervalChart('Labelled precision and recall of the current policy', [
      { label: 'precision', ...(lab.precision || { value: null }) },
      { label: 'recall', ...(lab.recall || { value: null }) }]),
    el('p', { class: 'muted', id: 'labelled-counts', text: `${lab.pairs} labelled pairs: TP ${lab.true_positives}, FP ${lab.false_positives}, FN ${lab.false_negatives}, TN ${lab.true_negatives}; ${lab.disputed} disputed (contradictory labels, left out), ${lab.missing} with an item gone${lab.not_evaluated ? `, ${lab.not_evaluated} not evaluated (only the 10,000 most recently labelled are)` : ''}.` }));
    const sc = d.s_curve;
    const banding = sc.max_hamming == null ? `${sc.bands} bands × ${sc.rows} rows` : `SimHash, Hamming distance ≤ ${sc.max_hamming}`;
    card(curveChart(`S-curve: ${banding}`, sc.points, 'Jaccard similarity of a pair', 'P(candidate)', [
      { x: sc.threshold, label: `LSH threshold ${sc.threshold}` },
      { x: sc.threshold_similar, label: `similar ${sc.threshold_similar}`, cls: 'similar' }]));
    const decisions = Object.entries(d.decisions).map(([k, n]) => ({ label: k.replace('_', ' '), value: n }));
    card(barChart('Decisions by state', decisions, 'state', 'decisions'));
    card(barChart('Candidates per query', histogramBars(d.candidates_per_query, (b) => '≤' + b), 'candidates retrieved', 'queries'));
    card(barChart('Band bucket sizes', histogramBars(d.bucket_sizes, (b, i) => (i === 0 ? '1' : `${2 ** i}–${b}`)), 'items in a bucket', 'buckets'));
    card(barChart('Verification scores', histogramBars(d.verification_score, (b) => '≤' + b), 'exact Jaccard of a verified candidate', 'candidates'));
    const minutes = d.ingest_per_minute.map((m) => ({ label: new Date(m.minute_ms).toISOString().slice(11, 16), value: m.items }));
    card(barChart('Ingest rate', minutes, 'minute (UTC)', 'items per minute'));
    const lat = (b) => (b < 1 ? `${b * 1000}ms` : `${b}s`);
    card(barChart('Ingest latency', histogramBars(d.ingest_seconds, lat), 'seconds per upsert', 'upserts'));
    card(barChart('Query latency', histogramBars(d.query_seconds, lat), 'seconds per query', 'queries'));
    card(barChart('Tombstone lag', histogramBars(d.tombstone_seconds, lat), 'seconds from request to applied', 'tombstones'));
    const sh = d.shadow;
    card(el('h2', { text: 'Shadow index (migration)' }), sh
      ? el('table', { id: 'shadow' }, el('tbody', {},
        [['shadow version', sh.shadow_version], ['live version', sh.live_version], ['items in the shadow', fmt(sh.items)], ['queries compared', fmt(sh.queries)],
          ['decision disagreements', `${fmt(sh.decision_disagreements)} (${pct(sh.decision_disagreement_rate)})`], ['match-set disagreements', fmt(sh.match_set_disagreements)],
          ['matches only live found', fmt(sh.live_only_matches)], ['matches only the shadow found', fmt(sh.shadow_only_matches)],
          ...Object.entries(sh.transitions).map(([k, n]) => ['transition ' + k, fmt(n)])].map(([k, val]) => el('tr', {}, el('th', { text: k }), el('td', { text: val })))))
      : el('p', { class: 'empty', text: 'No shadow index: no migration under way.' }));
  }

  async function operatorsView() {
    const v = clear(view());
    v.appendChild(heading('Operators'));
    let list;
    const g = generation;
    try {
      list = await api('GET', '/v1/tenants');
    } catch (e) {
      if (e.status === 401 || e.status === 403) {
        v.appendChild(el('p', { class: 'empty', text: 'This view needs the operator token.' }));
        return;
      }
      throw e;
    }
    const table = el('table', { id: 'tenants-table' }, el('thead', {}, el('tr', {},
      ['Tenant', 'Live items', 'Bytes', 'Tombstones', 'Labels', 'Largest bucket', 'Queries', 'Shadow', 'Actions'].map((h) => el('th', { text: h })))));
    const body = el('tbody');
    table.appendChild(body);
    v.appendChild(table);
    for (const name of list.tenants) {
      if (stale(g)) return;
      const d = await api('GET', `/v1/tenants/${id(name)}`);
      if (stale(g)) return;
      const s = d.stats;
      const act = (label, f, cls) => el('button', { type: 'button', class: cls, on: { click: () => f().catch(fail) } }, label);
      body.appendChild(el('tr', { 'data-tenant': name },
        el('td', { class: 'id', text: name }), el('td', { text: fmt(s.live_items) }), el('td', { text: fmt(s.live_bytes) }),
        el('td', { text: fmt(s.tombstones) }), el('td', { text: fmt(s.labels) }), el('td', { text: fmt(s.largest_bucket) }),
        el('td', { text: fmt(s.queries) }), el('td', { text: s.shadow ? 'yes' : 'no' }),
        el('td', {},
          act('Open', async () => { session.set(name, null); go({ view: 'queue' }); }), ' ',
          act('Snapshot', async () => download(name)), ' ',
          act('Compact', async () => {
            if (!window.confirm(`Compact ${name}? Tombstoned records are dropped and slots renumbered.`)) return;
            await api('POST', `/v1/tenants/${id(name)}/compact`);
            say(`Compacted ${name}.`, true);
          }), ' ',
          act('Rebuild…', async () => {
            if (!window.confirm(`Rebuild ${name} under its current configuration? Every signature and posting is recomputed; the previous configuration is kept for rollback.`)) return;
            await api('POST', `/v1/tenants/${id(name)}/rebuild`, { config: {} });
            say(`Rebuilt ${name}.`, true);
          }, 'danger'))));
    }
    if (!list.tenants.length) body.appendChild(el('tr', {}, el('td', { colspan: 9, class: 'empty', text: 'No tenant yet.' })));
  }

  async function download(name) {
    const blob = await api('GET', `/v1/tenants/${id(name)}/snapshot`);
    const url = URL.createObjectURL(blob);
    const a = el('a', { href: url, download: `${name}.ndsnap` });
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
    say(`Snapshot of ${name} downloaded (${fmt(blob.size)} bytes).`, true);
  }

  // ---- the shell ----------------------------------------------------------

  let keys = null;
  document.addEventListener('keydown', (e) => { if (keys) keys(e); });

  function fail(e) {
    if (e instanceof ApiError && e.status === 401) {
      session.clear();
      say('The key was refused (401): sign in again.');
      render();
      return;
    }
    say(e instanceof ApiError ? `${e.code}: ${e.message}` : String(e && e.message ? e.message : e));
  }

  async function render() {
    generation += 1;
    const p = route();
    keys = null;
    const signedIn = !!session.key;
    $('login').hidden = signedIn;
    $('view').hidden = !signedIn;
    $('nav').hidden = !signedIn;
    $('logout').hidden = !signedIn;
    $('who').textContent = signedIn ? (session.tenant ? `tenant ${session.tenant}` : 'operator') + (session.reviewer ? ` · ${session.reviewer}` : '') : '';
    if (!signedIn) {
      $('login-tenant').value = p.get('tenant') || '';
      return;
    }
    const name = p.get('view') || (session.tenant ? 'queue' : 'operators');
    for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.view === name || (name === 'compare' && a.dataset.view === 'queue'));
    const views = { queue: queueView, compare: compareView, neighbourhood: neighbourhoodView, dashboard: dashboardView, operators: operatorsView };
    const f = views[name] || queueView;
    if (f !== operatorsView && !session.tenant) {
      go({ view: 'operators' });
      return;
    }
    document.body.dataset.view = name;
    document.body.dataset.loading = '1';
    try {
      await f(p);
    } catch (e) {
      fail(e);
    } finally {
      delete document.body.dataset.loading;
    }
  }

  $('login-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const key = $('login-key').value.trim();
    if (!key) {
      say('Enter an API key.');
      return;
    }
    session.set($('login-tenant').value.trim(), key, $('login-reviewer').value.trim());
    $('login-key').value = '';
    say('', true);
    go({ view: session.tenant ? 'queue' : 'operators' });
  });
  $('logout').addEventListener('click', () => {
    session.clear();
    location.hash = '';
    render();
  });
  for (const a of document.querySelectorAll('#nav a')) {
    a.addEventListener('click', (e) => { e.preventDefault(); say('', true); go({ view: a.dataset.view }); });
  }
  window.addEventListener('hashchange', render);
  render();
})();
