// The dashboard's only script: live figures, the chart, sorting, the controls. Everything a crawl
// brought back is set with textContent (never innerHTML), so it stays text.
"use strict";

const csrf = () => document.querySelector('meta[name="csrf-token"]').content;

function setText(id, value) {
  const element = document.getElementById(id);
  if (element !== null) element.textContent = String(value);
}

function size(bytes) {
  const units = ["B", "KB", "MB", "GB"];
  let value = bytes, unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
  return unit === 0 ? `${value.toFixed(0)} B` : `${value.toFixed(1)} ${units[unit]}`;
}

function row(cells, className) {
  const tr = document.createElement("tr");
  if (className) tr.className = className;
  for (const [text, numeric] of cells) {
    const td = document.createElement("td");
    td.textContent = String(text);
    if (numeric) td.className = "n";
    tr.appendChild(td);
  }
  return tr;
}

function fillTable(id, rows) {
  const body = document.querySelector(`#${id} tbody`);
  if (body === null) return;
  body.replaceChildren(...rows);
}

const SVG = "http://www.w3.org/2000/svg";

function drawChart(series) {
  const svg = document.getElementById("chart");
  if (svg === null) return;
  const points = series.filter((p) => p[0] !== null && p[2] !== null);
  const children = [];
  if (points.length > 1) {
    const t0 = points[0][0], t1 = points[points.length - 1][0];
    const top = Math.max(1, ...points.map((p) => p[2]));
    const x = (t) => (t1 > t0 ? ((t - t0) / (t1 - t0)) * 780 + 10 : 10);
    const y = (v) => 190 - (v / top) * 170;
    const line = document.createElementNS(SVG, "polyline");
    line.setAttribute("points", points.map((p) => `${x(p[0]).toFixed(1)},${y(p[2]).toFixed(1)}`).join(" "));
    line.setAttribute("class", "series");
    children.push(line);
    setText("chart-caption", `the last ${Math.round(t1 - t0)} s; top of the chart: ${top.toFixed(1)} pages/s`);
  }
  svg.replaceChildren(...children);
}

function showOverview(data) {
  setText("state", data.state);
  document.getElementById("state").className = `state-${data.state.replace(" ", "-")}`;
  setText("termination", data.termination ? `ended: ${data.termination}` : "");
  setText("pages", data.pages);
  setText("pps", data.pages_per_second_recent);
  setText("pps-average", data.pages_per_second_average);
  setText("bytes", size(data.bytes));
  setText("frontier", data.frontier);
  setText("in-flight", data.in_flight);
  setText("hosts", `${data.hosts.active} / ${data.hosts.parked} / ${data.hosts.known}`);
  setText("awaiting", data.hosts.awaiting_address);
  setText("caches", `${data.caches.robots_cached} / ${data.caches.dns_cached}`);
  for (const cache of ["dns", "robots"]) {
    const figures = data.caches[cache];
    const rate = typeof figures.hit_rate === "number" ? `${(100 * figures.hit_rate).toFixed(1)}%` : "–";
    setText(`${cache}-hit-rate`, `${rate} (${figures.hits} / ${figures.misses})`);
  }
  const causes = Object.entries(data.host_delays.by_cause).map(([cause, n]) => `${cause} ${n}`).join(", ");
  setText("delay-causes", causes || "–");
  fillTable("outcomes", data.outcomes.map((o) => row([[o.outcome], [o.count, true], [o.share === null ? "" : `${(100 * o.share).toFixed(2)}%`, true]], `kind-${o.kind}`)));
  if (data.table_scanned_at) setText("scanned-at", new Date(data.table_scanned_at * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC");
  if (data.content_types) fillTable("content-types", Object.entries(data.content_types).map(([k, n]) => row([[k], [n, true]])));
  if (data.page_sizes) fillTable("page-sizes", data.page_sizes.map((b) => row([[b.le === null ? "larger" : size(b.le)], [b.count, true]])));
  const partitions = document.getElementById("partitions-section");
  if (partitions !== null) partitions.hidden = data.partitions.length === 0;
  fillTable("partitions", data.partitions.map((p) => row([[p.partition], [p.state], [p.pages, true], [p.pages_per_second_recent, true], [p.frontier, true], [p.in_flight, true], [p.active_hosts, true], [p.errors, true]])));
  const nodes = document.getElementById("nodes-section");
  if (nodes !== null) nodes.hidden = data.nodes.length === 0 && !data.nodes_error;
  setText("nodes-error", data.nodes_error || "");
  fillTable("nodes", data.nodes.map((n) => row([[n.node], [n.state], [n.pages, true], [n.pages_per_second_recent, true], [n.frontier, true], [n.in_flight, true], [n.errors, true], [n.redis], [n.updated_seconds_ago ?? "", true]])));
  drawChart(data.series);
  for (const button of document.querySelectorAll("button[data-command]")) {
    const command = button.dataset.command;
    const live = data.state === "running" || data.state === "paused" || data.state === "starting";
    // resume is offered from the pause command on: a partition that never hears it must not hold the crawl paused
    button.disabled = !live || (command === "pause" && data.state === "paused") || (command === "resume" && data.state !== "paused" && data.last_command?.command !== "pause");
  }
}

const SERIES_POINTS = 1800;  // as many as the server keeps (serve/view.py)
let series = [];

async function poll() {
  try {
    // after the first answer only the chart's new points: the server need not send the hour again
    const since = series.length ? `?since=${series[series.length - 1][0]}` : "";
    const response = await fetch(`/api/overview${since}`, { credentials: "same-origin" });
    if (response.ok) {
      const data = await response.json();
      const fresh = data.series.filter((p) => !series.length || p[0] > series[series.length - 1][0]);
      series = series.concat(fresh).slice(-SERIES_POINTS);
      data.series = series;
      showOverview(data);
    }
  } catch (error) {
    setText("state", "dashboard unreachable");
  }
  window.setTimeout(poll, 500);
}

async function control(command) {
  const response = await fetch(`/api/control/${command}`, {
    method: "POST",
    credentials: "same-origin",
    headers: { "X-CSRF-Token": csrf() },
  });
  const answer = await response.json();
  setText("control-result", response.ok ? `${command} sent` : answer.error);
}

function sortable(table) {
  const headers = table.querySelectorAll("th");
  headers.forEach((th, column) => {
    th.addEventListener("click", () => {
      const numeric = th.dataset.type === "number";
      const descending = th.dataset.sorted !== "desc";
      headers.forEach((other) => delete other.dataset.sorted);
      th.dataset.sorted = descending ? "desc" : "asc";
      const body = table.tBodies[0];
      const rows = Array.from(body.rows);
      const key = (tr) => tr.cells[column].dataset.value ?? tr.cells[column].textContent;
      rows.sort((a, b) => {
        const [x, y] = [key(a), key(b)];
        const order = numeric ? Number(x) - Number(y) : x.localeCompare(y);
        return descending ? -order : order;
      });
      body.replaceChildren(...rows);
    });
  });
}

document.addEventListener("DOMContentLoaded", () => {
  for (const table of document.querySelectorAll("table.sortable")) sortable(table);
  for (const button of document.querySelectorAll("button[data-command]")) {
    button.addEventListener("click", () => control(button.dataset.command));
  }
  if (document.body.dataset.page === "overview") poll();
});
