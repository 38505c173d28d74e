// tenant.js: the tenant page (figures, chart, outflow settings, pause and
// resume, audit trail, dead letters, job lists) and the job page. Routes
// this server lacks answer 404 or 405; their sections then say "not
// available" and the rest of the page works.
"use strict";

(function () {
  const S = window.Sluice;
  const $ = S.$;
  const el = S.el;
  let tenant = ""; // the tenant shown
  let auditCursor = null;
  let dlqCursor = null;
  let jobsCursor = null;

  const base = () => "/admin/v1/tenants/" + encodeURIComponent(tenant);

  function msg(id, text, isError) {
    const p = $(id);
    p.textContent = text;
    p.classList.toggle("error", !!isError);
  }

  function figure(label, value, field) {
    return el("div", {}, el("dt", { text: label }), el("dd", { "data-field": field, text: value }));
  }

  async function refreshStats() {
    const r = await S.api("GET", "/v1/tenants/" + encodeURIComponent(tenant) + "/stats");
    if (!r.ok) {
      $("tenant-updated").textContent = "Not updated: " + r.error;
      return;
    }
    const st = r.data;
    const o = st.outflow || {};
    const adm = st.admission || {};
    const shaped = !o.unlimited;
    $("tenant-stats").replaceChildren(
      figure("Backlog (units)", S.count(st.backlog), "backlog"),
      figure("Configured rate", shaped ? S.rate(o.configured_rate) + "/s" : "unlimited", "configured_rate"),
      figure("Effective rate", shaped ? S.rate(o.effective_rate) + "/s" : "unlimited", "effective_rate"),
      figure("Measured outflow", S.rate(o.measured_rate) + "/s", "measured_rate"),
      figure("Water level", shaped ? S.rate(st.water_level) + " / " + S.rate(o.capacity) : "—", "water_level"),
      figure("In flight", S.count(st.in_flight), "in_flight"),
      figure("Dead letters", S.count(st.dlq), "dlq"),
      figure("Admitted/s", S.rate(adm.admitted_rate), "admitted_rate"),
      figure("Refused/s", S.rate(adm.refused_rate), "refused_rate"),
      figure("Drain ETA", S.eta(st.eta_seconds), "eta"));
    $("tenant-state").replaceChildren(typeof st.paused === "boolean" ? S.stateBadge(st) : el("span", { text: "Pause state not reported" }));
    $("pause-text").textContent = typeof st.paused !== "boolean"
      ? "This server does not report a paused state."
      : st.paused ? "Paused: no new deliveries start; ingest keeps admitting into the backlog."
        : "Running: deliveries start at the shaped rate.";
    $("tenant-updated").textContent = " · Updated " + new Date().toLocaleTimeString("en-GB");
  }

  async function refreshChart() {
    const r = await S.api("GET", base() + "/history");
    if (r.ok) window.SluiceChart.draw($("tenant-chart"), r.data, { height: 220 });
    else $("tenant-chart").replaceChildren(el("p", { class: "msg", text: r.absent ? "History: not available on this server." : "History: " + r.error }));
  }

  // The outflow form's fields, and the values the spec had when the form
  // was filled: Save sends only what the operator changed, so a field left
  // at its default (capacity max(1, rate)) follows a new rate on the server
  // instead of being sent back as if chosen.
  const outflowFields = [["rate", "f-rate"], ["capacity", "f-capacity"], ["concurrency", "f-concurrency"]];
  let filled = {};

  function fillOutflow(spec) {
    const o = (spec && spec.outflow) || {};
    filled = {};
    for (const [name, id] of outflowFields) {
      $(id).value = o[name] !== undefined ? o[name] : "";
      filled[name] = $(id).value;
    }
  }

  async function loadSpec() {
    const r = await S.api("GET", base());
    if (r.ok) fillOutflow(r.data.spec);
    else msg("outflow-msg", "Settings cannot be read: " + r.error, true);
  }

  async function saveOutflow(ev) {
    ev.preventDefault();
    const patch = {};
    for (const [name, id] of outflowFields) {
      const v = $(id).value.trim();
      if (v !== "" && v !== filled[name]) patch[name] = Number(v);
    }
    if (Object.keys(patch).length === 0) {
      msg("outflow-msg", "Nothing changed.");
      return;
    }
    msg("outflow-msg", "Saving…");
    const r = await S.api("PATCH", base(), { outflow: patch });
    if (!r.ok) {
      msg("outflow-msg", "Not saved: " + r.error, true);
      return;
    }
    fillOutflow(r.data.spec);
    msg("outflow-msg", "Saved (version " + r.data.version + ").");
    loadAudit(true);
  }

  async function setPaused(paused) {
    msg("pause-msg", paused ? "Pausing…" : "Resuming…");
    const r = await S.api("PATCH", base(), { outflow: { paused: paused } });
    if (!r.ok) {
      msg("pause-msg", (paused ? "Not paused: " : "Not resumed: ") + r.error, true);
      return;
    }
    msg("pause-msg", paused ? "Paused. Deliveries in flight finish; no new ones start." : "Resumed.");
    refreshStats();
    loadAudit(true);
  }

  function change(c) {
    const v = (x) => (x === null || x === undefined ? "∅" : x);
    return el("li", { text: c.path + ": " + v(c.old) + " → " + v(c.new) });
  }

  async function loadAudit(fresh) {
    if (fresh) auditCursor = null;
    const q = "?limit=20" + (auditCursor ? "&cursor=" + encodeURIComponent(auditCursor) : "");
    const r = await S.api("GET", base() + "/audit" + q);
    if (!r.ok) {
      msg("audit-msg", r.absent ? "Audit trail: not available on this server." : "Audit trail: " + r.error, !r.absent);
      return;
    }
    const rows = (r.data.entries || []).map((e) => el("tr", {},
      el("td", { text: S.time(e.at) }), el("td", { text: e.who }), el("td", { text: e.action + " (v" + e.version + ")" }),
      el("td", {}, el("ul", { class: "changes" }, ...(e.changes || []).map(change),
        e.truncated ? el("li", { text: "… " + e.changes_total + " changes in all" }) : null))));
    if (fresh || !auditCursor) $("audit-rows").replaceChildren(...rows);
    else $("audit-rows").append(...rows);
    msg("audit-msg", $("audit-rows").children.length ? "" : "No admin changes recorded.");
    auditCursor = r.data.next_cursor || null;
    $("audit-more").hidden = !auditCursor;
  }

  function dlqRow(d) {
    let armed = 0;
    const del = el("button", { type: "button", class: "danger", "aria-label": "Delete dead job " + d.job_id, text: "Delete" });
    del.addEventListener("click", async () => {
      if (!armed) {
        del.textContent = "Confirm delete";
        armed = setTimeout(() => { armed = 0; del.textContent = "Delete"; }, 5000);
        return;
      }
      clearTimeout(armed);
      const r = await S.api("DELETE", base() + "/dlq/" + encodeURIComponent(d.job_id));
      await loadDLQ(true);
      msg("dlq-msg", r.ok ? "Deleted " + r.data.deleted + " dead job." : "Not deleted: " + r.error, !r.ok);
    });
    const redrive = el("button", { type: "button", "aria-label": "Redrive dead job " + d.job_id, text: "Redrive" });
    redrive.addEventListener("click", async () => {
      const r = await S.api("POST", base() + "/dlq:redrive", { job_ids: [d.job_id] });
      await loadDLQ(true);
      const skipped = r.ok && (r.data.skipped || []).length ? r.data.skipped[0] : null;
      if (skipped && skipped.reason === "redriving") msg("dlq-msg", "Not redriven here: another redrive is putting " + d.job_id + " back on the queue.", false);
      else if (skipped) msg("dlq-msg", "Not redriven: " + d.job_id + " is " + skipped.reason + " (it stays in the DLQ).", true);
      else if (r.ok && r.data.redriven === 0) msg("dlq-msg", "Not redriven: " + d.job_id + " is no longer in the DLQ.", true);
      else msg("dlq-msg", r.ok ? "Redriven " + r.data.redriven + " job: it is back on the queue." : "Not redriven: " + r.error, !r.ok);
    });
    return el("tr", { "data-job": d.job_id },
      el("td", {}, el("a", { href: "#/job/" + encodeURIComponent(d.job_id) + "?tenant=" + encodeURIComponent(tenant), text: d.job_id })),
      el("td", { text: d.type }), el("td", { text: d.reason }), el("td", { class: "num", text: d.status || "—" }),
      el("td", { class: "num", text: S.count(d.attempts) }), el("td", { text: S.time(d.failed_at) }),
      el("td", { class: "clip", title: d.excerpt || "", text: d.last_error || "" }),
      el("td", { class: "row-actions" }, redrive, del));
  }

  async function loadDLQ(fresh) {
    if (fresh) dlqCursor = null;
    const q = "?limit=50" + (dlqCursor ? "&cursor=" + encodeURIComponent(dlqCursor) : "");
    const r = await S.api("GET", base() + "/dlq" + q);
    if (!r.ok) {
      $("dlq-rows").replaceChildren();
      $("dlq-more").hidden = true;
      $("dlq-table").hidden = $("dlq-refresh").hidden = !!r.absent;
      if (r.absent) msg("dlq-msg", "Dead letters: not available on this server.");
      else msg("dlq-msg", "Dead letters: " + r.error, true);
      return;
    }
    $("dlq-table").hidden = $("dlq-refresh").hidden = false;
    const rows = (r.data.jobs || []).map(dlqRow);
    if (fresh || !dlqCursor) $("dlq-rows").replaceChildren(...rows);
    else $("dlq-rows").append(...rows);
    if (!$("dlq-rows").children.length) msg("dlq-msg", "No dead jobs.");
    else if ($("dlq-msg").textContent.startsWith("Dead letters")) msg("dlq-msg", "");
    dlqCursor = r.data.next_cursor || null;
    $("dlq-more").hidden = !dlqCursor;
  }

  async function loadJobs(fresh) {
    if (fresh) jobsCursor = null;
    const state = $("jobs-state").value;
    const q = "?state=" + encodeURIComponent(state) + "&tenant=" + encodeURIComponent(tenant) + "&limit=50" +
      (jobsCursor ? "&cursor=" + encodeURIComponent(jobsCursor) : "");
    const r = await S.api("GET", "/v1/jobs" + q);
    if (!r.ok) {
      $("jobs-rows").replaceChildren();
      $("jobs-more").hidden = true;
      $("jobs-table").hidden = $("jobs-form").hidden = !!r.absent;
      msg("jobs-msg", r.absent ? "Job lists: not available on this server." : "Job list: " + r.error, !r.absent);
      return;
    }
    $("jobs-table").hidden = $("jobs-form").hidden = false;
    const rows = (r.data.jobs || []).map((j) => el("tr", { "data-job": j.job_id },
      el("td", {}, el("a", { href: "#/job/" + encodeURIComponent(j.job_id) + "?tenant=" + encodeURIComponent(tenant), text: j.job_id })),
      el("td", { text: j.type }), el("td", { text: j.state }), el("td", { class: "num", text: S.count(j.attempt) }),
      el("td", { class: "num", text: S.count(j.position) }), el("td", { class: "num", text: S.eta(j.eta_seconds) }),
      el("td", { text: S.time(j.updated_at) })));
    if (fresh || !jobsCursor) $("jobs-rows").replaceChildren(...rows);
    else $("jobs-rows").append(...rows);
    msg("jobs-msg", $("jobs-rows").children.length ? "" : "No " + state + " jobs.");
    jobsCursor = r.data.next_cursor || null;
    $("jobs-more").hidden = !jobsCursor;
  }

  // tenantPage shows tenant id: figures every 2 s, the chart every 5 s.
  S.tenantPage = function (id) {
    tenant = id;
    $("tenant-title").textContent = "Tenant " + id;
    for (const t of ["tenant-stats", "tenant-chart", "audit-rows", "dlq-rows", "jobs-rows"]) $(t).replaceChildren();
    for (const m of ["outflow-msg", "pause-msg", "audit-msg", "dlq-msg", "jobs-msg"]) msg(m, "");
    fillOutflow(null);
    loadSpec();
    loadAudit(true);
    loadDLQ(true);
    loadJobs(true);
    const stops = [S.every(2000, refreshStats), S.every(5000, refreshChart)];
    return () => stops.forEach((f) => f());
  };

  // jobPage shows one job, as GET /v1/jobs/{id} answers it (in tenant, or
  // looked up in every tenant when "").
  S.jobPage = function (id, inTenant) {
    $("job-title").textContent = "Job " + id;
    $("job-fields").replaceChildren();
    msg("job-msg", "Looking up…");
    const link = $("job-tenant-link");
    link.textContent = inTenant || "any tenant";
    link.href = inTenant ? "#/tenant/" + encodeURIComponent(inTenant) : "#/";
    const q = inTenant ? "?tenant=" + encodeURIComponent(inTenant) : "";
    S.api("GET", "/v1/jobs/" + encodeURIComponent(id) + q).then((r) => {
      if (!r.ok) {
        msg("job-msg", "Not found: " + r.error, true);
        return;
      }
      msg("job-msg", "");
      const j = r.data;
      link.textContent = j.tenant;
      link.href = "#/tenant/" + encodeURIComponent(j.tenant);
      const rows = [];
      for (const [k, v] of Object.entries(j)) {
        let text = v === null || v === undefined || v === "" ? "—" : typeof v === "object" ? JSON.stringify(v) : String(v);
        if (k === "eta_seconds") text = S.eta(v);
        rows.push(el("dt", { text: k.replace(/_/g, " ") }), el("dd", { "data-field": k, text: text }));
      }
      $("job-fields").replaceChildren(...rows);
    });
    return null;
  };

  // initTenantPage binds the page's controls once.
  S.initTenantPage = function () {
    $("outflow-form").addEventListener("submit", saveOutflow);
    $("pause-btn").addEventListener("click", () => setPaused(true));
    $("resume-btn").addEventListener("click", () => setPaused(false));
    $("audit-more").addEventListener("click", () => loadAudit(false));
    $("dlq-refresh").addEventListener("click", () => loadDLQ(true));
    $("dlq-more").addEventListener("click", () => loadDLQ(false));
    $("jobs-form").addEventListener("submit", (ev) => { ev.preventDefault(); loadJobs(true); });
    $("jobs-more").addEventListener("click", () => loadJobs(false));
  };
})();
