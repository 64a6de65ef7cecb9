// The dashboard: every view reads the public API of its own origin, signing
// with the key the user loaded (sign.js). No framework, no build step.
import { loadKey, signatureHeaders } from "./sign.js";

const $ = (sel) => document.querySelector(sel);
const state = { id: null, view: "registry", registryCursor: null, worldsCursor: null, world: null, follow: null };
window.dashboard = state; // tests and curious people may look

// ApiError is a failed call, worded for a person.
class ApiError extends Error {}

// api calls the API and returns the answer's JSON (a world answer's data).
// signed: sign with the loaded key (refused when none is loaded).
async function api(method, path, { body, signed = false, signal } = {}) {
  const url = new URL(path, location.origin).toString();
  const bytes = body === undefined ? new Uint8Array() : new TextEncoder().encode(JSON.stringify(body));
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (signed) {
    if (!state.id) throw new ApiError(`${method} ${path} needs a signing key: load one above (or use the harness's dev key).`);
    Object.assign(headers, await signatureHeaders(state.id, method, url, bytes));
  }
  let resp;
  try {
    resp = await fetch(url, { method, headers, body: body === undefined ? undefined : bytes, cache: "no-store", signal });
  } catch (e) {
    throw new ApiError(`Could not reach the API at ${location.origin} for ${method} ${path} (is the server running?): ${e.message}`);
  }
  const text = await resp.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { /* worded below */ }
  if (!resp.ok) throw new ApiError(`${method} ${path} failed: ${resp.status} ${describe(json, text)}`);
  if (json && typeof json === "object" && json.ok === true && "data" in json) return json.data;
  return json;
}

// describe words an error body of any surface: worlds {ok:false, error:
// {code, message}}, registry {error, message}, the gateway's {message}.
function describe(json, text) {
  if (json && typeof json === "object") {
    if (json.error && typeof json.error === "object") return `${json.error.code}: ${json.error.message}`;
    if (typeof json.error === "string") return `${json.error}: ${json.message ?? ""}`;
    // The gateway's own answer when no route matches.
    if (json.message === "Not Found") return "Not Found (this server has no such route)";
    if (json.message) return json.message;
  }
  return text ? text.slice(0, 300) : "(no body)";
}

function showError(err, where = "#error") {
  const box = $(where);
  box.textContent = err instanceof ApiError ? err.message : `Something went wrong: ${err.message}`;
  box.hidden = false;
}

function clearError(where = "#error") {
  $(where).hidden = true;
  $(where).textContent = "";
}

// guard runs a view action, showing its failure where a person reads it.
async function guard(fn, where = "#error") {
  clearError(where);
  try { await fn(); } catch (e) { showError(e, where); }
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text ?? "";
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function button(label, onClick, name) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  if (name) b.setAttribute("aria-label", name);
  b.addEventListener("click", onClick);
  return b;
}

const when = (t) => (t ? new Date(t).toLocaleString() : "");
// enc escapes a path segment as awn does (Go's url.PathEscape): an awnId's
// colons stay as they are.
const enc = (s) => encodeURIComponent(s).replace(/%3A/gi, ":");

// ---- key ----

async function useKey(pemText, from) {
  state.id = await loadKey(pemText);
  $("#key-status").textContent = `Signing as ${state.id.awnId} (keyid ${state.id.keyid}), loaded from ${from}.`;
  render();
}

$("#dev-key").addEventListener("click", () => guard(async () => {
  let resp;
  try { resp = await fetch("/_harness/dev-key", { cache: "no-store" }); } catch (e) {
    throw new ApiError(`Could not reach the server for its dev key (is it running?): ${e.message}`);
  }
  if (!resp.ok) throw new ApiError(`This server offers no dev key (${resp.status}): only the local harness does, to this machine. Load a key file instead.`);
  await useKey(await resp.text(), "the harness's dev key");
}));

$("#key-file").addEventListener("change", (ev) => guard(async () => {
  const f = ev.target.files[0];
  if (f) await useKey(await f.text(), f.name);
}));

$("#forget-key").addEventListener("click", () => {
  state.id = null;
  $("#key-status").textContent = "No key loaded: public views only.";
  render();
});

// ---- views ----

const views = {
  registry: () => loadRegistry(false),
  worlds: () => loadWorlds(false),
  inboxes: loadInboxes,
  webhooks: loadWebhooks,
  events: async () => {},
  escrows: loadEscrows,
};

function render() {
  const name = views[location.hash.slice(1)] ? location.hash.slice(1) : "registry";
  const changed = name !== state.view;
  state.view = name;
  for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== "view-" + name;
  for (const a of document.querySelectorAll("nav a")) {
    if (a.getAttribute("href") === "#" + name) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (changed) $(`#${name}-h`).focus();
  if (name !== "events") stopFollowing();
  guard(views[name]);
}

window.addEventListener("hashchange", render);

// Registry with presence (public).
async function loadRegistry(more) {
  const q = new URLSearchParams({ status: $("#registry-status").value, limit: "50" });
  if ($("#registry-cap").value.trim()) q.set("capability", $("#registry-cap").value.trim());
  if (more && state.registryCursor) q.set("cursor", state.registryCursor);
  const data = await api("GET", "/api/v1/agents?" + q);
  const body = $("#registry-table tbody");
  if (!more) body.replaceChildren();
  for (const a of data.agents || []) {
    const tr = document.createElement("tr");
    tr.dataset.name = a.name;
    cell(tr, a.name);
    cell(tr, a.status, a.status);
    cell(tr, (a.capabilities || []).join(", "));
    cell(tr, a.endpoint, "id");
    cell(tr, a.awn_id, "id");
    cell(tr, when(a.updated_at));
    body.appendChild(tr);
  }
  state.registryCursor = data.next_cursor || null;
  $("#registry-more").hidden = !state.registryCursor;
}
$("#registry-form").addEventListener("submit", (ev) => { ev.preventDefault(); guard(() => loadRegistry(false)); });
$("#registry-more").addEventListener("click", () => guard(() => loadRegistry(true)));

// Worlds (public), then one world's members (member) and bans (owner).
async function loadWorlds(more) {
  const q = new URLSearchParams({ status: "any", limit: "50" });
  if (more && state.worldsCursor) q.set("cursor", state.worldsCursor);
  const data = await api("GET", "/v0/worlds?" + q);
  const body = $("#worlds-table tbody");
  if (!more) body.replaceChildren();
  for (const w of data.worlds || []) {
    const tr = document.createElement("tr");
    tr.dataset.world = w.worldId;
    cell(tr, w.worldId);
    cell(tr, w.name);
    cell(tr, w.category);
    cell(tr, w.status);
    cell(tr, String(w.memberCount));
    cell(tr, w.ownerAwnId, "id");
    cell(tr, "").appendChild(button("Open", () => guard(() => openWorld(w.worldId)), `Open world ${w.worldId}`));
    body.appendChild(tr);
  }
  state.worldsCursor = data.cursor || null;
  $("#worlds-more").hidden = !state.worldsCursor;
  if (state.world && !more) await openWorld(state.world, false);
}
$("#worlds-more").addEventListener("click", () => guard(() => loadWorlds(true)));

async function openWorld(world, focus = true) {
  state.world = world;
  const m = await api("GET", "/v0/worlds/" + enc(world));
  $("#world-detail").hidden = false;
  $("#world-h").textContent = `World ${m.worldId}: ${m.name}`;
  $("#world-summary").textContent = `${m.status}, ${m.memberCount} member(s)${m.maxMembers ? ` of at most ${m.maxMembers}` : ""}; ${m.description || ""}`;
  if (focus) $("#world-h").focus();
  await Promise.all([guard(loadMembers, "#members-error"), guard(loadBans, "#bans-error")]);
}

async function loadMembers() {
  const body = $("#members-table tbody");
  body.replaceChildren();
  const data = await api("GET", `/v0/worlds/${enc(state.world)}/agents?limit=100`, { signed: true });
  for (const a of data.agents || []) {
    const tr = document.createElement("tr");
    tr.dataset.awnId = a.awnId;
    cell(tr, String(a.slot));
    cell(tr, a.awnId, "id");
    cell(tr, a.subjectId ?? "");
    cell(tr, a.presence, a.presence);
    cell(tr, when(a.joinedAt));
    const actions = cell(tr, "");
    actions.appendChild(button("Kick", () => guard(async () => {
      await api("POST", `/v0/worlds/${enc(state.world)}/members/${enc(a.awnId)}/kick`, { signed: true });
      await loadWorlds(false); // counts change too
    }, "#members-error"), `Kick slot ${a.slot}`));
    body.appendChild(tr);
  }
}

async function loadBans() {
  const body = $("#bans-table tbody");
  body.replaceChildren();
  const data = await api("GET", `/v0/worlds/${enc(state.world)}/bans?limit=100`, { signed: true });
  for (const b of data.bans || []) {
    const tr = document.createElement("tr");
    tr.dataset.awnId = b.awnId;
    cell(tr, b.awnId, "id");
    cell(tr, b.reason ?? "");
    cell(tr, when(b.bannedAt));
    cell(tr, "").appendChild(button("Unban", () => guard(async () => {
      await api("DELETE", `/v0/worlds/${enc(state.world)}/bans/${enc(b.awnId)}`, { signed: true });
      await loadWorlds(false);
    }, "#bans-error"), `Unban ${b.awnId}`));
    body.appendChild(tr);
  }
}

$("#world-join").addEventListener("click", () => guard(async () => {
  if (!state.id) throw new ApiError("Joining needs a signing key: load one above.");
  await api("POST", `/v0/worlds/${enc(state.world)}/join`, { body: { publicKey: state.id.publicKey }, signed: true });
  await loadWorlds(false);
}, "#members-error"));

$("#ban-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  guard(async () => {
    const reason = $("#ban-reason").value.trim();
    await api("PUT", `/v0/worlds/${enc(state.world)}/bans/${enc($("#ban-id").value.trim())}`, { body: reason ? { reason } : {}, signed: true });
    $("#ban-id").value = "";
    $("#ban-reason").value = "";
    await loadWorlds(false);
  }, "#bans-error");
});

// The worlds the loaded key joined (GET /v0/agents/{awnId}/worlds).
async function joinedWorlds() {
  if (!state.id) throw new ApiError("This view shows the loaded key's own worlds: load a key above (or use the harness's dev key).");
  const data = await api("GET", `/v0/agents/${enc(state.id.awnId)}/worlds?limit=100`, { signed: true });
  return (data.worlds || []).filter((w) => w.role === "member");
}

// Inbox depth per joined world, read with peek.
async function loadInboxes() {
  const body = $("#inboxes-table tbody");
  body.replaceChildren();
  for (const w of await joinedWorlds()) {
    const tr = document.createElement("tr");
    tr.dataset.world = w.worldId;
    cell(tr, w.worldId);
    cell(tr, String(w.slot));
    cell(tr, w.presence, w.presence);
    const depth = cell(tr, "…");
    const oldest = cell(tr, "");
    body.appendChild(tr);
    try {
      const inbox = await api("GET", `/v0/worlds/${enc(w.worldId)}/messages?peek=true&limit=100`, { signed: true });
      depth.textContent = String(inbox.count);
      oldest.textContent = inbox.messages && inbox.messages.length ? when(inbox.messages[0].sentAt) : "";
    } catch (e) {
      depth.textContent = "unknown";
      showError(e);
    }
  }
  if (!body.children.length) body.appendChild(emptyRow(5, "The loaded key has joined no world."));
}

function emptyRow(span, text) {
  const tr = document.createElement("tr");
  cell(tr, text).colSpan = span;
  return tr;
}

// Webhook stats and dead letters per joined world, with replay.
async function loadWebhooks() {
  const since = $("#replay-since");
  if (!since.value) since.value = localInput(new Date(Date.now() - 14 * 24 * 3600 * 1000));
  const body = $("#webhooks-table tbody");
  body.replaceChildren();
  for (const w of await joinedWorlds()) {
    const tr = document.createElement("tr");
    tr.dataset.world = w.worldId;
    body.appendChild(tr);
    let v = null;
    try {
      v = await api("GET", `/v0/worlds/${enc(w.worldId)}/webhook`, { signed: true });
    } catch (e) {
      if (!/ 404 /.test(e.message)) throw e;
    }
    cell(tr, w.worldId);
    if (!v) { cell(tr, "no webhook").colSpan = 7; continue; }
    cell(tr, v.url, "id");
    cell(tr, v.enabled ? "yes" : `no: ${v.disabledReason || "disabled"}`);
    cell(tr, String(v.stats.delivered));
    cell(tr, String(v.stats.failed));
    cell(tr, String(v.stats.deadLettered)).className = "dead";
    cell(tr, v.stats.lastError ? `${v.stats.lastError} (${when(v.stats.lastErrorAt)})` : "");
    cell(tr, "").appendChild(button("Replay dead letters", () => guard(() => replay(w.worldId)), `Replay dead letters in ${w.worldId}`));
  }
  if (!body.children.length) body.appendChild(emptyRow(8, "The loaded key has joined no world."));
}

function localInput(d) {
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

async function replay(world) {
  const since = new Date($("#replay-since").value);
  if (isNaN(since)) throw new ApiError("Pick the time to replay dead letters since.");
  const r = await api("POST", `/v0/worlds/${enc(world)}/webhook/replay`, { body: { since: since.toISOString().replace(/\.\d+Z$/, "Z") }, signed: true });
  await loadWebhooks();
  $("#replay-result").textContent = `Replayed ${r.replayed} dead letter(s) in ${world}: they are sent again within a minute.`;
}
$("#replay-form").addEventListener("submit", (ev) => ev.preventDefault());

// Live events: the event stream (text/event-stream, read with fetch because
// EventSource cannot sign), falling back to long polls when this server has
// no stream route.
function stopFollowing() {
  if (state.follow) {
    state.follow.abort();
    state.follow = null;
    $("#events-status").textContent = "Stopped.";
  }
}

function showEvent(e) {
  const body = $("#events-table tbody");
  const tr = document.createElement("tr");
  tr.dataset.eventId = e.eventId;
  tr.dataset.type = e.type;
  cell(tr, when(e.createdAt));
  cell(tr, e.type);
  cell(tr, e.visibility);
  cell(tr, JSON.stringify(e.data), "id");
  body.appendChild(tr);
  while (body.children.length > 500) body.removeChild(body.firstChild);
}

async function follow(world, ctl) {
  let after = "";
  $("#events-table tbody").replaceChildren();
  let streamed = false;
  try {
    streamed = await followStream(world, ctl, (id) => { after = id; });
  } catch (e) {
    if (ctl.signal.aborted) return;
    throw e;
  }
  if (streamed || ctl.signal.aborted) return;
  $("#events-status").textContent = `Following ${world} (long poll: this server has no event stream).`;
  while (!ctl.signal.aborted) {
    const q = new URLSearchParams({ wait: "20", limit: "100" });
    if (after) q.set("after", after);
    const data = await api("GET", `/v0/worlds/${enc(world)}/events?${q}`, { signed: true, signal: ctl.signal }).catch((e) => { if (ctl.signal.aborted) return {}; throw e; });
    if (ctl.signal.aborted) return;
    for (const e of data.events || []) { showEvent(e); after = e.eventId; }
    if (data.cursor) after = data.cursor;
  }
}

// followStream reads the SSE stream until it ends, reconnecting after its
// retry hint with Last-Event-ID (the route resumes after it, nothing lost
// or repeated); false when this origin has no stream route (404: in AWS
// the stream is a function URL of its own, which this page, bound to its
// origin, does not call).
async function followStream(world, ctl, seen) {
  let last = "";
  const url = new URL(`/v0/worlds/${enc(world)}/events/stream`, location.origin).toString();
  for (;;) {
    if (!state.id) throw new ApiError("Following needs a signing key: load one above.");
    const headers = { Accept: "text/event-stream", ...(await signatureHeaders(state.id, "GET", url, new Uint8Array())) };
    if (last) headers["Last-Event-ID"] = last;
    let resp;
    try {
      resp = await fetch(url, { headers, signal: ctl.signal, cache: "no-store" });
    } catch (e) {
      if (ctl.signal.aborted) return true;
      throw new ApiError(`Could not reach the event stream (is the server running?): ${e.message}`);
    }
    if (resp.status === 404 && !last) return false;
    if (!resp.ok) {
      const text = await resp.text();
      let json = null;
      try { json = JSON.parse(text); } catch { /* worded by describe */ }
      throw new ApiError(`GET ${new URL(url).pathname} failed: ${resp.status} ${describe(json, text)}`);
    }
    $("#events-status").textContent = `Following ${world} (event stream).`;
    let retry = 1000;
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch {
        if (ctl.signal.aborted) return true;
        break; // the connection broke: resume like after an end
      }
      const { value, done } = chunk;
      if (done) break;
      buf += value;
      let i;
      while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(buf[i] === "\r" ? i + 4 : i + 2);
        let data = "";
        for (const line of block.split(/\r?\n/)) {
          if (line.startsWith("data:")) data += (data ? "\n" : "") + line.slice(5).replace(/^ /, "");
          else if (line.startsWith("id:")) last = line.slice(3).trim();
          else if (line.startsWith("retry:")) retry = Number(line.slice(6)) || retry;
        }
        if (data) { const e = JSON.parse(data); showEvent(e); last = e.eventId || last; seen(last); }
      }
    }
    if (ctl.signal.aborted) return true;
    $("#events-status").textContent = `Reconnecting to ${world}${last ? ` after event ${last}` : ""}…`;
    await new Promise((r) => setTimeout(r, retry));
    if (ctl.signal.aborted) return true;
  }
}

$("#events-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  stopFollowing();
  const ctl = new AbortController();
  state.follow = ctl;
  const world = $("#events-world").value.trim();
  $("#events-status").textContent = `Connecting to ${world}…`;
  guard(() => follow(world, ctl));
});
$("#events-stop").addEventListener("click", stopFollowing);

// Escrows and balance of the loaded key.
async function loadEscrows() {
  if (!state.id) throw new ApiError("This view shows the loaded key's account: load a key above.");
  const acct = await api("GET", `/api/v1/accounts/${enc(state.id.awnId)}`, { signed: true });
  const dl = $("#balance");
  dl.replaceChildren();
  for (const [k, v, id] of [["Balance", acct.balance, "balance-available"], ["Held in escrows", acct.held, "balance-held"]]) {
    const dt = document.createElement("dt"); dt.textContent = k;
    const dd = document.createElement("dd"); dd.textContent = String(v); dd.id = id;
    dl.append(dt, dd);
  }
  const body = $("#escrows-table tbody");
  body.replaceChildren();
  for (const role of ["buyer", "provider"]) {
    let cursor = null;
    do {
      const q = new URLSearchParams({ role, limit: "100" });
      if (cursor) q.set("cursor", cursor);
      const data = await api("GET", `/api/v1/escrows?${q}`, { signed: true });
      for (const e of data.escrows || []) {
        const tr = document.createElement("tr");
        tr.dataset.escrowId = e.id;
        tr.dataset.role = role;
        cell(tr, e.id, "id"); cell(tr, role); cell(tr, e.state, e.state); cell(tr, e.provider); cell(tr, e.capability); cell(tr, String(e.amount));
        body.appendChild(tr);
      }
      cursor = data.next_cursor || null;
    } while (cursor && body.children.length < 1000);
  }
  if (!body.children.length) body.appendChild(emptyRow(6, "The loaded key has no escrow."));
}
$("#escrows-refresh").addEventListener("click", () => guard(loadEscrows));
$("#inboxes-refresh").addEventListener("click", () => guard(loadInboxes));
$("#webhooks-refresh").addEventListener("click", () => guard(loadWebhooks));

state.view = null;
render();
