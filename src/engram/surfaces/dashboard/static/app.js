// Engram dashboard: a small page over the REST API (docs/dashboard.md). Every value from
// the server is put into the page as text (textContent, attribute values, option labels),
// never as markup, so a memory that contains HTML or a script stays inert. The page's
// Content-Security-Policy allows this script only: no inline script, no inline style
// attribute (widths are set through the CSSOM). The key lives in this tab's sessionStorage.

const $ = (sel) => document.querySelector(sel);
const PAGE = 100;
const KEY_SLOT = "engram-key";
const state = { key: sessionStorage.getItem(KEY_SLOT) || "", me: null, user: "", agent: "",
  memories: [], next: null, picked: null, tab: "memories" };

// -- helpers -----------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else node.setAttribute(name, String(value));
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child ?? "")));
  }
  return node;
}

const when = (iso) => (iso || "").slice(0, 19).replace("T", " ");

function say(box, message) {
  box.textContent = message || "";
  box.hidden = !message;
}
const showError = (message) => say($("#error"), message);
const showNotice = (message) => say($("#notice"), message);

class ApiError extends Error {
  constructor(status, detail) {
    super(`${status}: ${detail}`);
    this.status = status;
  }
}

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${state.key}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers,
    body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!response.ok) {
    const detail = data && (data.detail || data.title);
    throw new ApiError(response.status, typeof detail === "string" ? detail : response.statusText);
  }
  return data;
}

const query = (params) => new URLSearchParams(
  Object.entries(params).filter(([, v]) => v !== "" && v != null)).toString();
const identity = () => (state.agent ? { user_id: state.user, agent_id: state.agent }
  : { user_id: state.user });
const memoryPath = (id, tail = "") => `/v1/memories/${encodeURIComponent(id)}${tail}`;

function meter(fraction, extra = "") {
  const bar = el("span");
  bar.style.width = `${(Math.max(0, Math.min(1, Math.abs(fraction))) * 100).toFixed(1)}%`;
  return el("div", { class: `meter ${extra}`.trim() }, bar);
}

// -- the key and whom it acts for ----------------------------------------------------------

async function login(event) {
  event?.preventDefault();
  const typed = $("#key").value.trim();
  if (typed) state.key = typed;
  if (!state.key) return;
  try {
    state.me = await api("GET", "/v1/whoami");
  } catch (err) {
    forget();
    const why = err instanceof ApiError && err.status === 401
      ? "This key was not accepted: it is unknown, revoked or malformed." : err.message;
    showError(`Could not use this key. ${why}`);
    return;
  }
  sessionStorage.setItem(KEY_SLOT, state.key);
  $("#key").value = "";
  $("#logout").hidden = false;
  const me = state.me;
  $("#who").textContent = `tenant ${me.tenant_id} · key ${me.key_id}`
    + (me.admin ? " · admin" : "") + (me.users ? ` · users ${me.users.join(", ")}` : "")
    + (me.agents ? ` · agents ${me.agents.join(", ")}` : "");
  showError("");
  try {
    await pickers();
  } catch (err) {
    showError(err.message);
    return;
  }
  $("#identity").hidden = false;
  $("#tabs").hidden = false;
  openTab(state.tab);
}

async function pickers() {
  const me = state.me;
  let users = [];
  let help = "";
  try {
    users = (await api("GET", "/v1/users")).users;
    if (!users.length) help = "No user of this tenant owns a memory yet: type a user id.";
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 403)) throw err;
    help = "This key may act for any user it names, but listing the tenant's users needs"
      + " an admin key: type a user id.";
  }
  $("#user").replaceChildren(...users.map((u) => el("option", { value: u }, u)));
  $("#user-pick").hidden = !users.length;
  $("#user-typed-pick").hidden = users.length > 0;
  state.user = users[0] || "";
  const agents = me.agents || [];
  $("#agents").replaceChildren(...agents.map((a) => el("option", { value: a })));
  $("#agent").value = agents[0] || "";
  $("#agent").required = agents.length > 0;
  state.agent = agents[0] || "";
  if (agents.length) help += `${help ? " " : ""}This key acts only for agents ${agents.join(", ")}.`;
  say($("#identity-help"), help);
}

function forget() {
  sessionStorage.removeItem(KEY_SLOT);
  Object.assign(state, { key: "", me: null, user: "", agent: "", memories: [], picked: null });
  for (const id of ["#identity", "#tabs", "#logout", "#detail", "#recall-out", "#identity-help"]) {
    $(id).hidden = true;
  }
  for (const section of document.querySelectorAll(".tab")) section.hidden = true;
  $("#who").textContent = "";
  showNotice("");
}

function chooseIdentity(event) {
  event?.preventDefault();
  state.user = ($("#user-pick").hidden ? $("#user-typed").value : $("#user").value).trim();
  state.agent = $("#agent").value.trim();
  state.picked = null;
  $("#detail").hidden = true;
  $("#recall-out").hidden = true;
  openTab(state.tab);
}

function openTab(name) {
  state.tab = name;
  for (const button of document.querySelectorAll("#tabs button")) {
    button.classList.toggle("active", button.dataset.tab === name);
  }
  for (const section of document.querySelectorAll(".tab")) section.hidden = section.id !== name;
  showNotice("");
  if (!state.user) {
    showError("Pick or type a user first.");
    return;
  }
  if (name === "memories") loadMemories();
  if (name === "audit") loadAudit();
}

// -- memories ------------------------------------------------------------------------------

async function loadMemories(event, offset = 0) {
  event?.preventDefault();
  if (!state.user) return;
  const form = new FormData($("#filters"));
  try {
    const page = await api("GET", `/v1/memories?${query({ ...identity(),
      type: form.get("type").trim(), status: form.get("status"), limit: PAGE, offset })}`);
    state.memories = offset ? state.memories.concat(page.items) : page.items;
    state.next = page.next_offset;
    renderMemories();
    showError("");
  } catch (err) { showError(err.message); }
}

function options(select, values) {
  const current = select.value;
  select.replaceChildren(el("option", { value: "" }, "any"),
    ...values.map((v) => el("option", { value: v }, v)));
  select.value = values.includes(current) ? current : "";
}

function renderMemories() {
  const form = new FormData($("#filters"));
  const [scope, from, to] = [form.get("scope"), form.get("from"), form.get("to")];
  const distinct = (field) => [...new Set(state.memories.map((r) => r[field]))].sort();
  $("#types").replaceChildren(...distinct("type").map((t) => el("option", { value: t })));
  options($("#filters select[name=scope]"), distinct("scope"));
  const shown = state.memories.filter((r) => {
    const day = (r.observed_at || "").slice(0, 10);
    return (!scope || r.scope === scope) && (!from || day >= from) && (!to || day <= to);
  });
  const rows = shown.map((r) => {
    const row = el("tr", { "data-id": r.id }, el("td", {}, when(r.observed_at).slice(0, 16)),
      el("td", {}, r.type), el("td", {}, r.scope), el("td", { class: `status ${r.status}` },
        r.status), el("td", { class: "content" }, r.content));
    row.classList.toggle("picked", r.id === state.picked);
    row.addEventListener("click", () => { showNotice(""); pick(r.id); });
    return row;
  });
  $("#memory-table tbody").replaceChildren(...rows);
  $("#count").textContent = `${shown.length} shown of ${state.memories.length} loaded`
    + (state.next === null ? "" : " (more on the server)");
  $("#more").hidden = state.next === null;
}

async function pick(id) {
  state.picked = id;
  for (const row of document.querySelectorAll("#memory-table tbody tr")) {
    row.classList.toggle("picked", row.dataset.id === id);
  }
  try {
    const record = await api("GET", `${memoryPath(id)}?${query(identity())}`);
    const { versions } = await api("GET", `${memoryPath(id, "/history")}?${query(identity())}`);
    $("#detail-id").textContent = record.id;
    $("#detail-content").textContent = record.content;
    const fields = ["type", "status", "scope", "key", "authority", "confidence", "version",
      "observed_at", "valid_from", "valid_to", "expires_at", "retention", "sensitivity"];
    $("#detail-fields").replaceChildren(...fields.flatMap((f) => [el("dt", {}, f),
      el("dd", {}, record[f] === null ? "—" : typeof record[f] === "object"
        ? JSON.stringify(record[f]) : record[f])]));
    $("#timeline").replaceChildren(...versions.map((v) => el("li",
      { class: `${v.status}${v.id === record.id ? " current" : ""}`, "data-id": v.id },
      el("strong", {}, `v${v.version} · ${v.status}`), " ",
      el("span", { class: "muted" }, `${when(v.created_at)} · ${v.authority}`),
      el("div", { class: "content" }, v.content))));
    $("#detail").hidden = false;
    const editable = record.status === "active";
    $("#act-correct").disabled = !editable;
    $("#act-retract").disabled = !editable;
    showError("");
  } catch (err) { showError(err.message); }
}

function ask(title, help, initial) {
  return new Promise((resolve) => {
    const dialog = $("#edit");
    $("#edit-title").textContent = title;
    $("#edit-help").textContent = help;
    $("#edit-text").value = initial ?? "";
    $("#edit-text").hidden = initial === null;
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"
      ? $("#edit-text").value : null), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
  });
}

async function act(kind) {
  const id = state.picked;
  const current = state.memories.find((r) => r.id === id);
  try {
    if (kind === "correct") {
      const text = await ask("Correct this memory",
        "The new content becomes the next version; this one stays in the history.",
        current ? current.content : $("#detail-content").textContent);
      if (text === null) return;
      if (!text.trim()) { showError("The corrected content is empty: nothing changed."); return; }
      const done = await api("POST", memoryPath(id, "/correct"), { ...identity(), content: text });
      showNotice(`Corrected: version ${done.record.version} is now the active one.`);
      await loadMemories();
      await pick(done.record.id);
    } else if (kind === "retract") {
      const reason = await ask("Retract this memory",
        "It stays in the history and is never recalled again. Why is it wrong?", "");
      if (reason === null) return;
      const body = reason.trim() ? { ...identity(), reason: reason.trim() } : identity();
      await api("POST", memoryPath(id, "/retract"), body);
      showNotice("Retracted: kept in the history, never recalled again.");
      await loadMemories();
      await pick(id);
    } else {
      const ok = await ask("Delete this memory for good?",
        "Every version and every copy derived from it is erased; this cannot be undone.", null);
      if (ok === null) return;
      const receipt = await api("DELETE", `${memoryPath(id)}?${query(identity())}`);
      state.picked = null;
      $("#detail").hidden = true;
      showNotice(`Deleted ${receipt.deleted.length} version(s) and ${receipt.derived.length}`
        + ` derived cop${receipt.derived.length === 1 ? "y" : "ies"}; `
        + (receipt.verified ? "verified gone." : "the check found something left."));
      await loadMemories();
    }
  } catch (err) { showError(err.message); }
}

// -- recall --------------------------------------------------------------------------------

function bar(label, fraction, value, attrs = {}, extra = "") {
  return el("div", { class: "bar", ...attrs }, el("span", { class: "label" }, label),
    meter(fraction, extra), el("span", { class: "muted" }, value));
}

function funnel(trace) {
  const widest = Math.max(1, ...trace.stages.map((s) => Math.max(s.in, s.out)));
  const rows = trace.stages.map((s) => el("div", { class: "stage", "data-stage": s.name },
    el("span", { class: "label" }, s.name), meter(s.out / widest, "centered"),
    el("span", { class: "muted count" }, `${s.in} → ${s.out}`)));
  const channels = Object.entries(trace.channels || {}).map(([name, c]) =>
    `${name} ${c.count}${c.error ? ` (failed: ${c.error})` : ""}`);
  return [...rows, el("p", { class: "muted" }, `candidates by channel: ${channels.join(" · ")}`)];
}

function components(result) {
  const items = traceItems(result);
  if (!items.length) return [el("p", { class: "muted" }, "No item was selected.")];
  return items.map(({ item, record }) => {
    const parts = Object.entries(item.components).filter(([, v]) => v !== 0)
      .sort((a, b) => b[1] - a[1]);
    return el("div", { class: "item", "data-id": item.id },
      el("strong", {}, `score ${item.score.toFixed(3)} `), el("code", {}, item.id),
      el("div", { class: "content" }, record ? record.content : ""),
      el("div", { class: "muted" }, item.reason),
      el("div", { class: "bars" }, ...parts.map(([name, v]) => bar(name, v, v.toFixed(3),
        { "data-component": name }, v < 0 ? "negative" : ""))),
      el("div", { class: "muted" }, "components that are 0 are not drawn"));
  });
}

function traceItems(result) {
  const records = new Map(result.items.map((i) => [i.record.id, i.record]));
  return result.trace.selected.map((item) => ({ item, record: records.get(item.id) }));
}

function rejections(trace) {
  const counts = Object.entries(trace.rejection_counts || {}).sort((a, b) => b[1] - a[1]);
  if (!counts.length) return [el("p", { class: "muted" }, "No candidate was rejected.")];
  const most = Math.max(...counts.map(([, n]) => n));
  return counts.map(([reason, n]) => bar(reason, n / most, String(n), { "data-reason": reason }));
}

async function runRecall(event) {
  event.preventDefault();
  if (!state.user) { showError("Pick or type a user first."); return; }
  const form = new FormData($("#recall-form"));
  try {
    const result = await api("POST", "/v1/recall", { ...identity(), query: form.get("query"),
      budget: { max_items: Number(form.get("max_items")),
        max_tokens: Number(form.get("max_tokens")) } });
    const trace = result.trace;
    $("#recall-status").textContent = result.status;
    $("#recall-tokens").textContent = `${trace.tokens_used} of ${trace.token_budget} tokens`;
    $("#recall-trace").textContent = result.trace_id;
    say($("#recall-clarification"), result.clarification);
    $("#recall-prompt").textContent = result.prompt || "(empty: nothing to put in the prompt)";
    $("#funnel").replaceChildren(...funnel(trace));
    $("#components").replaceChildren(...components(result));
    $("#rejections").replaceChildren(...rejections(trace));
    $("#recall-out").hidden = false;
    showError("");
  } catch (err) { showError(err.message); }
}

// -- audit ---------------------------------------------------------------------------------

async function loadAudit() {
  if (state.agent && !state.me.admin) {
    showError("A key limited to agents cannot read a user's audit log (it spans every agent).");
    return;
  }
  try {
    const log = await api("GET", `/v1/audit?${query({ user_id: state.user })}`);
    $("#audit-table tbody").replaceChildren(...log.entries.slice().reverse().map((e) =>
      el("tr", { "data-seq": e.seq }, el("td", {}, e.seq), el("td", {}, when(e.at)),
        el("td", {}, e.actor), el("td", {}, e.operation),
        el("td", {}, e.record_ids.join(", ") || "—"), el("td", {}, e.reason))));
    $("#audit-count").textContent = `${log.entries.length} of ${log.total} entries shown.`;
    showError("");
  } catch (err) { showError(err.message); }
}

// -- wiring --------------------------------------------------------------------------------

$("#login").addEventListener("submit", login);
$("#logout").addEventListener("click", forget);
$("#identity").addEventListener("submit", chooseIdentity);
$("#user").addEventListener("change", chooseIdentity);
$("#filters").addEventListener("submit", (e) => loadMemories(e));
$("#filters select[name=scope]").addEventListener("change", renderMemories);
$("#more").addEventListener("click", () => loadMemories(undefined, state.next));
$("#recall-form").addEventListener("submit", runRecall);
for (const b of document.querySelectorAll("#tabs button")) {
  b.addEventListener("click", () => openTab(b.dataset.tab));
}
$("#act-correct").addEventListener("click", () => act("correct"));
$("#act-retract").addEventListener("click", () => act("retract"));
$("#act-delete").addEventListener("click", () => act("delete"));
if (state.key) login();
