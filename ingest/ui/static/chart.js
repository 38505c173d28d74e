// chart.js: the console's backlog/outflow chart, an inline SVG drawn from
// the points of GET /admin/v1/tenants/{id}/history. No library: two lines
// (backlog on the left axis, outflow in units/s on the right) over the last
// 15 minutes, with a gap where no slot was sampled.
"use strict";

(function () {
  const NS = "http://www.w3.org/2000/svg";
  const SPAN = 15 * 60;

  function svg(tag, attrs, text) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // scale rounds a maximum up to 1, 2 or 5 times a power of ten, with
  // gridlines at round values: {max, steps}.
  function scale(v) {
    if (!(v > 0)) return { max: 1, steps: 4 };
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (v <= m * p * 1.0000001) return { max: m * p, steps: m === 2 ? 4 : 5 };
    return { max: 10 * p, steps: 5 };
  }

  function fmt(v) {
    if (v >= 1e6) return (v / 1e6).toFixed(1).replace(/\.0$/, "") + "M";
    if (v >= 1e4) return (v / 1e3).toFixed(0) + "k";
    if (v >= 1e3) return (v / 1e3).toFixed(1).replace(/\.0$/, "") + "k";
    return String(Math.round(v * 100) / 100);
  }

  // path builds the d attribute of a series, breaking the line where two
  // samples are more than two steps apart.
  function path(points, key, x, y, step) {
    let d = "";
    let prev = null;
    for (const p of points) {
      const cmd = prev !== null && p.t - prev <= 2 * step ? "L" : "M";
      d += cmd + x(p.t).toFixed(1) + " " + y(p[key]).toFixed(1) + " ";
      prev = p.t;
    }
    return d.trim();
  }

  // draw replaces the content of container with the chart of history h
  // ({tenant, step_seconds, points}), as wide as the container (one SVG
  // unit a pixel, so the text keeps its size); opts.height sets the height.
  function draw(container, h, opts) {
    const W = Math.max(320, container.clientWidth || 640), H = (opts && opts.height) || 200;
    const L = 48, R = 52, T = 14, B = 26;
    const pts = (h && h.points) || [];
    const step = (h && h.step_seconds) || 5;
    const now = Math.max(Date.now() / 1000, pts.length ? pts[pts.length - 1].t + step : 0);
    const from = now - SPAN;
    const shown = pts.filter((p) => p.t >= from);
    const bs = scale(Math.max(0, ...shown.map((p) => p.backlog)));
    const os = scale(Math.max(0, ...shown.map((p) => p.outflow)));
    const bMax = bs.max, oMax = os.max;
    const x = (t) => L + ((t - from) / SPAN) * (W - L - R);
    const yB = (v) => T + (1 - v / bMax) * (H - T - B);
    const yO = (v) => T + (1 - v / oMax) * (H - T - B);

    const last = shown.length ? shown[shown.length - 1] : null;
    const label = "Backlog and outflow of " + (h ? h.tenant : "") + " over the last 15 minutes" +
      (last ? ": backlog now " + last.backlog + " units, outflow " + last.outflow.toFixed(1) + " units/s" : ": no samples in the last 15 minutes");
    const root = svg("svg", { viewBox: "0 0 " + W + " " + H, class: "chart", role: "img", "aria-label": label });
    root.appendChild(svg("title", {}, label));

    for (let i = 0; i <= bs.steps; i++) {
      const v = bMax * (i / bs.steps);
      root.appendChild(svg("line", { x1: L, x2: W - R, y1: yB(v), y2: yB(v), class: "grid" }));
      root.appendChild(svg("text", { x: L - 6, y: yB(v) + 4, class: "axis backlog", "text-anchor": "end" }, fmt(v)));
    }
    for (let i = 0; i <= os.steps; i++) {
      const v = oMax * (i / os.steps);
      root.appendChild(svg("text", { x: W - R + 6, y: yO(v) + 4, class: "axis outflow" }, fmt(v)));
    }
    for (const m of [15, 10, 5, 0]) {
      const xx = x(now - m * 60);
      root.appendChild(svg("text", { x: xx, y: H - 8, class: "axis", "text-anchor": m === 15 ? "start" : m === 0 ? "end" : "middle" },
        m === 0 ? "now" : "−" + m + " min"));
    }
    if (shown.length) {
      root.appendChild(svg("path", { d: path(shown, "backlog", x, yB, step), class: "line backlog" }));
      root.appendChild(svg("path", { d: path(shown, "outflow", x, yO, step), class: "line outflow" }));
    } else {
      root.appendChild(svg("text", { x: W / 2, y: H / 2, class: "axis", "text-anchor": "middle" }, "No samples in the last 15 minutes"));
    }

    const legend = document.createElement("p");
    legend.className = "legend";
    legend.setAttribute("aria-hidden", "true");
    const b = document.createElement("span");
    b.className = "key backlog";
    b.textContent = "Backlog (units, left)" + (last ? ": " + last.backlog : "");
    const o = document.createElement("span");
    o.className = "key outflow";
    o.textContent = "Outflow (units/s, right)" + (last ? ": " + last.outflow.toFixed(1) : "");
    legend.append(b, o);
    container.replaceChildren(root, legend);
  }

  window.SluiceChart = { draw: draw };
})();
