// Engram dashboard: a small page over the REST API. Every value from the server is put
// into the page as text (textContent), never as markup, so a memory that contains HTML
// or a script stays inert. The key lives in sessionStorage for this tab only.

const $ = (sel) => document.querySelector(sel);
const state = { key: sessionStorage.getItem("engram-key") || "", user: "", memories: [],
                picked: null };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else if (name === "style") node.style.cssText = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child ?? "")));
  }
  return node;
}

function showError(message) {
  const box = $("#error");
  box.textContent = message;
  box.hidden = !message;
}

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${state.key}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers,
    body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) {
    const detail = data && (data.detail || data.title);
    throw new Error(`${response.status}: ${typeof detail === "string" ? detail : text}`);
  }
  return data;
}

const query = (params) => {
  const clean = Object.entries(params).filter(([, v]) => v !== "" && v != null);
  return new URLSearchParams(clean).toString();
};

async function login(event) {
  event?.preventDefault();
  const typed = $("#key").value.trim();
  if (typed) state.key = typed;
  if (!state.key) return;
  try {
    const me = await api("GET", "/v1/whoami");
    sessionStorage.setItem("engram-key", state.key);
    $("#who").textContent = `tenant ${me.tenant_id}${me.admin ? " · admin" : ""}`;
    const { users } = await api("GET", "/v1/users");
    const pick = $("#user");
    pick.replaceChildren(...users.map((u) => el("option", { value: u }, u)));
    $("#user-pick").hidden = false;
    $("#tabs").hidden = false;
    state.user = users[0] || "";
    showError(users.length ? "" : "No users with memories in this tenant yet.");
    openTab("memories");
  } catch (err) {
    sessionStorage.removeItem("engram-key");
    showError(`Could not use this key (${err.message}).`);
  }
}

function openTab(name) {
  for (const button of document.querySelectorAll("#tabs button")) {
    button.classList.toggle("active", button.dataset.tab === name);
  }
  for (const section of document.querySelectorAll(".tab")) section.hidden = section.id !== name;
  if (name === "memories") loadMemories();
  if (name === "audit") loadAudit();
}

function inRange(record, from, to) {
  const day = (record.observed_at || "").slice(0, 10);
  return (!from || day >= from) && (!to || day <= to);
}

async function loadMemories(event) {
  event?.preventDefault();
  if (!state.user) return;
  const form = new FormData($("#filters"));
  try {
    const status = form.get("status") || "all";
    const data = await api("GET", `/v1/memories?${query({ user_id: state.user,
      type: form.get("type"), status, limit: 500 })}`);
    const scope = form.get("scope");
    state.memories = data.items.filter((r) => (!scope || r.scope === scope)
      && inRange(r, form.get("from"), form.get("to")));
    renderMemories();
    showError("");
  } catch (err) { showError(err.message); }
}

function renderMemories() {
  const rows = state.memories.map((r) => {
    const row = el("tr", { "data-id": r.id }, el("td", {}, (r.observed_at || "").slice(0, 16)),
      el("td", {}, r.type), el("td", {}, r.scope), el("td", {}, r.status),
      el("td", { class: "content" }, r.content));
    row.addEventListener("click", () => pick(r.id));
    return row;
  });
  $("#memory-table tbody").replaceChildren(...rows);
  $("#count").textContent = `${rows.length} memories`;
  if (!state.memories.some((r) => r.id === state.picked)) $("#detail").hidden = true;
}

async function pick(id) {
  state.picked = id;
  for (const row of document.querySelectorAll("#memory-table tbody tr")) {
    row.classList.toggle("picked", row.dataset.id === id);
  }
  try {
    const record = await api("GET", `/v1/memories/${encodeURIComponent(id)}?${query({ user_id: state.user })}`);
    const { items } = await api("GET",
      `/v1/memories/${encodeURIComponent(id)}/history?${query({ user_id: state.user })}`);
    $("#detail-id").textContent = record.id;
    $("#detail-content").textContent = record.content;
    const fields = ["type", "status", "scope", "authority", "confidence", "key", "version",
      "observed_at", "expires_at", "retention", "sensitivity"];
    $("#detail-fields").replaceChildren(...fields.flatMap((f) => [el("dt", {}, f),
      el("dd", {}, record[f] === null ? "—" : record[f])]));
    $("#timeline").replaceChildren(...items.map((v) => el("li",
      { class: v.status, "data-id": v.id },
      el("strong", {}, `v${v.version} · ${v.status}`), " ",
      el("span", { class: "muted" }, (v.created_at || "").slice(0, 19).replace("T", " ")),
      el("div", { class: "content" }, v.content))));
    $("#detail").hidden = false;
    const editable = record.status === "active";
    $("#act-correct").disabled = !editable;
    $("#act-retract").disabled = !editable;
  } catch (err) { showError(err.message); }
}

function ask(title, help, initial) {
  return new Promise((resolve) => {
    const dialog = $("#edit");
    $("#edit-title").textContent = title;
    $("#edit-help").textContent = help;
    $("#edit-text").value = initial;
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
      const text = await ask("Correct this memory", "The new content becomes the next version.",
        current ? current.content : "");
      if (text === null || !text.trim()) return;
      await api("POST", `/v1/memories/${encodeURIComponent(id)}/correct`,
        { user_id: state.user, content: text });
    } else if (kind === "retract") {
      const reason = await ask("Retract this memory", "Why is it wrong? Kept in its history.",
        "retracted in the dashboard");
      if (reason === null) return;
      await api("POST", `/v1/memories/${encodeURIComponent(id)}/retract`,
        { user_id: state.user, reason: reason || "retracted in the dashboard" });
    } else {
      const ok = await ask("Delete this memory for good?",
        "Every version and derived copy is erased; this cannot be undone.", null);
      if (ok === null) return;
      await api("DELETE", `/v1/memories/${encodeURIComponent(id)}?${query({ user_id: state.user })}`);
    }
    await loadMemories();
  } catch (err) { showError(err.message); }
}

function meter(fraction) {
  const width = Math.max(0, Math.min(1, fraction)) * 100;
  return el("div", { class: "meter" }, el("span", { style: `width:${width.toFixed(1)}%` }));
}

async function runRecall(event) {
  event.preventDefault();
  const form = new FormData($("#recall-form"));
  try {
    const result = await api("POST", "/v1/recall", { user_id: state.user, query: form.get("query"),
      budget: { max_items: Number(form.get("max_items")), max_tokens: Number(form.get("max_tokens")) } });
    const trace = result.trace;
    $("#recall-status").textContent = result.status;
    $("#recall-tokens").textContent = `${trace.tokens_used} of ${trace.token_budget} tokens`;
    $("#recall-prompt").textContent = result.prompt;
    const widest = Math.max(1, ...trace.stages.map((s) => Math.max(s.in, s.out)));
    $("#funnel").replaceChildren(...trace.stages.map((s) => el("div",
      { class: "stage", "data-stage": s.name }, el("span", {}, s.name), meter(s.out / widest),
      el("span", { class: "muted" }, `${s.in} → ${s.out}`))));
    $("#components").replaceChildren(...trace.selected.map((item) => {
      const text = (result.items.find((i) => i.id === item.id) || {}).content || "";
      const bars = Object.entries(item.components).filter(([, v]) => v > 0).map(([name, v]) =>
        el("div", { class: "bar" }, el("span", {}, name), meter(v),
          el("span", { class: "muted" }, v.toFixed(2))));
      return el("div", { class: "item", "data-id": item.id },
        el("strong", {}, `${item.score.toFixed(3)} `), el("code", {}, item.id),
        el("div", { class: "content" }, text), el("div", { class: "muted" }, item.reason),
        el("div", { class: "bars" }, ...bars));
    }));
    const reasons = Object.entries(trace.rejection_counts || {});
    $("#rejections").replaceChildren(...(reasons.length ? reasons.map(([reason, n]) =>
      el("li", { "data-reason": reason }, `${reason}: ${n}`)) : [el("li", {}, "none")]));
    $("#recall-out").hidden = false;
    showError("");
  } catch (err) { showError(err.message); }
}

async function loadAudit() {
  try {
    const { entries } = await api("GET", `/v1/audit?${query({ user_id: state.user })}`);
    $("#audit-table tbody").replaceChildren(...entries.map((e) => el("tr", {},
      el("td", {}, e.seq), el("td", {}, (e.at || "").slice(0, 19).replace("T", " ")),
      el("td", {}, e.action), el("td", {}, e.record_id || "—"), el("td", {}, e.reason || ""))));
    showError("");
  } catch (err) { showError(err.message); }
}

$("#login").addEventListener("submit", login);
$("#user").addEventListener("change", (e) => { state.user = e.target.value; openTab("memories"); });
$("#filters").addEventListener("submit", loadMemories);
$("#recall-form").addEventListener("submit", runRecall);
for (const b of document.querySelectorAll("#tabs button")) {
  b.addEventListener("click", () => openTab(b.dataset.tab));
}
$("#act-correct").addEventListener("click", () => act("correct"));
$("#act-retract").addEventListener("click", () => act("retract"));
$("#act-delete").addEventListener("click", () => act("delete"));
if (state.key) login();
