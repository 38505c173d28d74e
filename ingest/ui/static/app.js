// app.js: the console's core (the API client, the login, the views) and the
// tenants overview. The admin token lives in sessionStorage (this tab only)
// and goes out only in the Authorization header of fetch calls, never in a
// URL. Every text is set with textContent: nothing from the API is parsed
// as HTML.
"use strict";

(function () {
  const TOKEN = "sluice.admin_token";
  const S = (window.Sluice = {});
  const $ = (id) => document.getElementById(id);
  S.$ = $;

  // el builds an element: attrs are attributes (class, href, …), with
  // "text" for textContent and "on<event>" for listeners; kids are nodes
  // or strings.
  S.el = function (tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "text") e.textContent = String(v);
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const k of kids) if (k !== null && k !== undefined) e.append(k);
    return e;
  };

  S.token = () => sessionStorage.getItem(TOKEN);

  // api sends one request with the admin token and answers
  // {ok, status, data, error, absent}: error is the problem+json detail (or
  // the status line), absent says the route does not exist on this server.
  S.api = async function (method, path, body) {
    const headers = { Accept: "application/json" };
    const token = S.token();
    if (token) headers.Authorization = "Bearer " + token;
    const init = { method: method, headers: headers, cache: "no-store", credentials: "omit" };
    if (body !== undefined) {
      headers["Content-Type"] = method === "PATCH" ? "application/merge-patch+json" : "application/json";
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      return { ok: false, status: 0, error: "ingest cannot be reached" };
    }
    let data = null;
    const text = await res.text();
    try {
      data = text ? JSON.parse(text) : null;
    } catch (e) {
      data = null;
    }
    if (res.ok) return { ok: true, status: res.status, data: data };
    const error = (data && (data.detail || data.title)) || res.status + " " + res.statusText;
    if (res.status === 401 && token) S.logout("The admin token was refused: " + error);
    const absent = res.status === 405 || (res.status === 404 && /^no route /.test(error));
    return { ok: false, status: res.status, data: data, error: error, absent: absent };
  };

  // Formatting.
  S.count = (v) => (typeof v === "number" ? v.toLocaleString("en-US") : "—");
  S.rate = (v) => (typeof v === "number" ? v.toFixed(Math.abs(v) < 1000 ? 2 : 0) : "—");
  S.eta = function (s) {
    if (typeof s !== "number") return "—";
    if (s < 60) return Math.round(s) + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.round((s % 3600) / 60) + " min";
  };
  // time shows an instant as local "YYYY-MM-DD hh:mm:ss".
  S.time = (v) => (v ? new Date(v).toLocaleString("sv-SE") : "—");

  // say shows a short message in the page's status line.
  let sayTimer = 0;
  S.say = function (text) {
    $("status").textContent = text;
    clearTimeout(sayTimer);
    sayTimer = setTimeout(() => ($("status").textContent = ""), 6000);
  };

  // every runs fn now and then ms after each run ends, until stopped.
  S.every = function (ms, fn) {
    let stopped = false;
    let timer = 0;
    const tick = async () => {
      try {
        await fn();
      } finally {
        if (!stopped) timer = setTimeout(tick, ms);
      }
    };
    tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  };

  // Tenants known from the last overview, for the job lookup's list.
  S.setTenants = function (ids) {
    const sel = $("lookup-tenant");
    const have = Array.from(sel.options).slice(1).map((o) => o.value);
    if (have.join("\n") === ids.join("\n")) return;
    const keep = sel.value;
    sel.replaceChildren(S.el("option", { value: "", text: "any" }), ...ids.map((t) => S.el("option", { value: t, text: t })));
    sel.value = ids.includes(keep) ? keep : "";
  };

  // ---------------------------------------------------------------- views

  const VIEWS = ["login-view", "overview-view", "tenant-view", "job-view"];
  let stopView = null;

  function show(view, title) {
    for (const v of VIEWS) $(v).hidden = v !== view;
    $("nav").hidden = view === "login-view";
    document.title = title + " · sluice console";
    const h = $(view).querySelector("h1");
    if (h && document.activeElement !== $("lookup-id")) h.focus({ preventScroll: false });
  }

  function route() {
    if (stopView) stopView();
    stopView = null;
    if (!S.token()) {
      show("login-view", "Sign in");
      $("token").focus();
      return;
    }
    const hash = location.hash || "#/";
    let m;
    if ((m = hash.match(/^#\/tenant\/([^/?]+)$/))) {
      const id = decodeURIComponent(m[1]);
      show("tenant-view", "Tenant " + id);
      stopView = S.tenantPage(id);
    } else if ((m = hash.match(/^#\/job\/([^/?]+)(?:\?tenant=([^&]*))?$/))) {
      const id = decodeURIComponent(m[1]);
      show("job-view", "Job " + id);
      stopView = S.jobPage(id, m[2] ? decodeURIComponent(m[2]) : "");
    } else {
      show("overview-view", "Tenants");
      stopView = overviewPage();
    }
  }
  S.route = route;

  S.logout = function (why) {
    sessionStorage.removeItem(TOKEN);
    $("login-error").textContent = why || "";
    route();
  };

  async function login(ev) {
    ev.preventDefault();
    const input = $("token");
    const token = input.value.trim();
    input.value = "";
    if (!token) return;
    sessionStorage.setItem(TOKEN, token);
    $("login-error").textContent = "";
    const r = await S.api("GET", "/admin/v1/overview");
    if (r.ok) {
      route();
      return;
    }
    if (r.status !== 401) {
      sessionStorage.removeItem(TOKEN);
      $("login-error").textContent = r.absent
        ? "The admin API is off on this server (no ingest.admin_tokens)."
        : "Cannot sign in: " + r.error;
    }
    input.focus();
  }

  function lookup(ev) {
    ev.preventDefault();
    const id = $("lookup-id").value.trim();
    if (!id) return;
    const t = $("lookup-tenant").value;
    location.hash = "#/job/" + encodeURIComponent(id) + (t ? "?tenant=" + encodeURIComponent(t) : "");
  }

  // ------------------------------------------------------------- overview

  function stateBadge(st) {
    if (typeof st.paused !== "boolean") return S.el("span", { class: "muted", text: "not reported" });
    return st.paused ? S.el("span", { class: "badge paused", text: "Paused" }) : S.el("span", { class: "badge running", text: "Running" });
  }
  S.stateBadge = stateBadge;

  function cell(field, text) {
    return S.el("td", { class: "num", "data-field": field, text: text });
  }

  function overviewRow(st) {
    const o = st.outflow || {};
    const adm = st.admission || {};
    const shaped = !o.unlimited;
    return S.el("tr", { "data-tenant": st.tenant },
      S.el("th", { scope: "row" }, S.el("a", { href: "#/tenant/" + encodeURIComponent(st.tenant), text: st.tenant })),
      S.el("td", { "data-field": "state" }, stateBadge(st)),
      cell("backlog", S.count(st.backlog)),
      cell("configured_rate", shaped ? S.rate(o.configured_rate) : "unlimited"),
      cell("effective_rate", shaped ? S.rate(o.effective_rate) : "unlimited"),
      cell("measured_rate", S.rate(o.measured_rate)),
      cell("water_level", shaped ? S.rate(st.water_level) + " / " + S.rate(o.capacity) : "—"),
      cell("in_flight", S.count(st.in_flight)),
      cell("dlq", S.count(st.dlq)),
      cell("admitted_rate", S.rate(adm.admitted_rate)),
      cell("refused_rate", S.rate(adm.refused_rate)),
      cell("eta", S.eta(st.eta_seconds)));
  }

  let overviewTenants = [];

  async function refreshOverview() {
    const r = await S.api("GET", "/admin/v1/overview");
    if (!r.ok) {
      $("overview-updated").textContent = "Not updated: " + r.error;
      return;
    }
    overviewTenants = (r.data && r.data.tenants) || [];
    S.setTenants(overviewTenants.map((t) => t.tenant));
    const rows = overviewTenants.map(overviewRow);
    if (!rows.length) rows.push(S.el("tr", {}, S.el("td", { colspan: 12, text: "No tenants are configured." })));
    $("overview-rows").replaceChildren(...rows);
    $("overview-updated").textContent = "Updated " + new Date().toLocaleTimeString("en-GB");
  }

  async function refreshCharts() {
    const ids = overviewTenants.map((t) => t.tenant);
    const box = $("charts");
    const answers = await Promise.all(ids.map((id) => S.api("GET", "/admin/v1/tenants/" + encodeURIComponent(id) + "/history")));
    const cards = ids.map((id, i) => {
      const chart = S.el("div", { class: "chart-box" });
      const card = S.el("figure", { class: "card chart-card", "data-tenant": id },
        S.el("figcaption", {}, S.el("a", { href: "#/tenant/" + encodeURIComponent(id), text: id })), chart);
      if (answers[i].ok) window.SluiceChart.draw(chart, answers[i].data, { height: 160 });
      else chart.append(S.el("p", { class: "msg", text: answers[i].absent ? "History: not available on this server." : "History: " + answers[i].error }));
      return card;
    });
    box.replaceChildren(...cards);
  }

  // overviewPage refreshes the table every 2 s and, once the tenants are
  // known, the charts every 5 s (the history's step).
  function overviewPage() {
    let stopped = false;
    let stopCharts = null;
    const stop = S.every(2000, async () => {
      await refreshOverview();
      if (!stopped && !stopCharts) stopCharts = S.every(5000, refreshCharts);
    });
    return () => {
      stopped = true;
      stop();
      if (stopCharts) stopCharts();
    };
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("login-form").addEventListener("submit", login);
    $("lookup-form").addEventListener("submit", lookup);
    $("logout").addEventListener("click", () => S.logout("Signed out."));
    window.addEventListener("hashchange", route);
    if (S.initTenantPage) S.initTenantPage();
    route();
  });
})();
