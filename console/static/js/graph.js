// Drawing a DAG as SVG, with no library: nodes in layers by their longest
// path from a root, edges as curves from a parent's right side to a
// child's left side. Every attribute is an SVG attribute or a class (no
// style attribute, which the content security policy refuses).

const svgNS = 'http://www.w3.org/2000/svg';
const boxW = 150;
const boxH = 40;
const gapX = 60;
const gapY = 24;

// layout places nodes [{id, parents}] in layers. It returns {layers,
// pos: Map id -> {x, y, layer}, width, height, problems}: problems lists
// unknown parents, duplicate ids and cycles (a node on a cycle is put in
// the last layer so that it is still drawn).
export function layout(nodes) {
  const problems = [];
  const byId = new Map();
  for (const n of nodes) {
    if (!n.id) {
      problems.push('a node has no id');
      continue;
    }
    if (byId.has(n.id)) problems.push(`node "${n.id}" appears twice`);
    byId.set(n.id, n);
  }
  for (const n of byId.values()) {
    for (const p of n.parents || []) {
      if (!byId.has(p)) problems.push(`node "${n.id}": parent "${p}" is not a node`);
      if (p === n.id) problems.push(`node "${n.id}" is its own parent`);
    }
  }
  // Kahn's order, with each node's layer its longest path from a root.
  const layer = new Map();
  const pending = new Map();
  const children = new Map();
  for (const n of byId.values()) {
    const ps = (n.parents || []).filter((p) => byId.has(p) && p !== n.id);
    pending.set(n.id, ps.length);
    for (const p of ps) {
      if (!children.has(p)) children.set(p, []);
      children.get(p).push(n.id);
    }
  }
  const queue = [...byId.keys()].filter((id) => pending.get(id) === 0);
  for (const id of queue) layer.set(id, 0);
  for (let i = 0; i < queue.length; i++) {
    const id = queue[i];
    for (const c of children.get(id) || []) {
      layer.set(c, Math.max(layer.get(c) || 0, layer.get(id) + 1));
      pending.set(c, pending.get(c) - 1);
      if (pending.get(c) === 0) queue.push(c);
    }
  }
  const cyclic = [...byId.keys()].filter((id) => pending.get(id) > 0);
  if (cyclic.length) problems.push(`a cycle runs through ${cyclic.map((id) => `"${id}"`).join(', ')}`);
  const last = Math.max(0, ...layer.values()) + (cyclic.length ? 1 : 0);
  for (const id of cyclic) layer.set(id, last);
  const layers = [];
  for (const id of byId.keys()) {
    const l = layer.get(id);
    (layers[l] = layers[l] || []).push(id);
  }
  const pos = new Map();
  let rows = 0;
  layers.forEach((ids, l) => {
    rows = Math.max(rows, ids.length);
    ids.forEach((id, i) => pos.set(id, {x: 10 + l * (boxW + gapX), y: 10 + i * (boxH + gapY), layer: l}));
  });
  return {
    layers, pos, problems,
    width: 20 + Math.max(1, layers.length) * (boxW + gapX) - gapX,
    height: 20 + Math.max(1, rows) * (boxH + gapY) - gapY,
  };
}

function el(tag, attrs, ...children) {
  const e = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined) e.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// draw returns an SVG of nodes [{id, parents, phase, href}] laid out by
// layout. A node with an href is a link; its class names its phase
// (phase-succeeded, ...), which app.css colours.
export function draw(nodes, label) {
  const g = layout(nodes);
  const svg = el('svg', {viewBox: `0 0 ${g.width} ${g.height}`, width: g.width, height: g.height, role: 'group',
    'aria-label': label, class: 'dag-graph'});
  for (const n of nodes) {
    const to = g.pos.get(n.id);
    if (!to) continue;
    for (const p of n.parents || []) {
      const from = g.pos.get(p);
      if (!from || p === n.id) continue;
      const x1 = from.x + boxW;
      const y1 = from.y + boxH / 2;
      const x2 = to.x;
      const y2 = to.y + boxH / 2;
      const mx = (x1 + x2) / 2;
      svg.append(el('path', {d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, class: 'edge', 'aria-hidden': 'true'}));
    }
  }
  for (const n of nodes) {
    const at = g.pos.get(n.id);
    if (!at) continue;
    const phase = n.phase || 'none';
    const text = n.phase ? `${n.id}: ${n.phase.replaceAll('_', ' ')}` : n.id;
    const box = el('g', {class: `node phase-${phase}`, 'data-node': n.id, 'data-phase': phase},
      el('title', {}, text),
      el('rect', {x: at.x, y: at.y, width: boxW, height: boxH, rx: 5}),
      el('text', {x: at.x + 8, y: at.y + 17}, n.id.length > 20 ? `${n.id.slice(0, 19)}…` : n.id),
      el('text', {x: at.x + 8, y: at.y + 33, class: 'phase'}, n.phase ? n.phase.replaceAll('_', ' ') : ''));
    if (n.href) {
      // The link's name is its text (the node and its state), which
      // keyboard and screen-reader users both get.
      svg.append(el('a', {href: n.href}, box));
    } else {
      box.setAttribute('role', 'img');
      box.setAttribute('aria-label', text);
      svg.append(box);
    }
  }
  return {svg, problems: g.problems};
}
