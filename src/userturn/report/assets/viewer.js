// userturn transcript viewer. Every model- or dataset-originated string reaches the page through
// textContent (or option.value / createTextNode); never through innerHTML. Data layout (see html.py):
//   DATA.s  strings; DATA.v  value tables {run, model, user_model, dataset, perturbation, label, classifier, finish}
//   DATA.e  entries {k key, r run, d dataset, i item id, m model, um user model, p perturbation, q query,
//           a response, ap assistant prompt, af finish, c correct, x extracted, ref reference, ctx [[role, s]]}
//   DATA.t  user turns {e entry, t temperature, n sample index, sd seed, u text, l label, r reason,
//           cl classifier, p rendered prompt, f finish}
(function () {
  "use strict";
  const DATA = JSON.parse(document.getElementById("userturn-data").textContent);
  const S = DATA.s, V = DATA.v, ENTRIES = DATA.e, TURNS = DATA.t;
  const PAGE_SIZE = 20;
  const FILTERS = [
    ["run", "Run"], ["model", "Model"], ["dataset", "Dataset"], ["temperature", "Temperature"],
    ["perturbation", "Perturbation"], ["label", "Label"], ["correct", "Correctness"],
  ];
  const CORRECTNESS = [["correct", "correct"], ["incorrect", "incorrect"], ["unscored", "not scored"]];

  for (const entry of ENTRIES) entry.turns = [];
  TURNS.forEach((turn, index) => ENTRIES[turn.e].turns.push(index));
  const entryIndex = new Map(ENTRIES.map((entry, index) => [entry.k, index]));
  const temperatures = Array.from(new Set(TURNS.map((t) => t.t))).sort((a, b) => a - b);

  let lowered = null;
  function lower(index) {
    if (lowered === null) lowered = S.map((s) => s.toLowerCase());
    return lowered[index];
  }
  function contains(index, needle) {
    return index !== undefined && lower(index).indexOf(needle) !== -1;
  }

  const state = { run: "", model: "", dataset: "", temperature: "", perturbation: "", label: "", correct: "",
                  q: "", page: 1, entry: "" };

  // ------------------------------------------------------------------ DOM helpers (text only)
  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }
  function fillHighlighted(node, text, needle) {
    if (!text) {
      node.appendChild(el("span", "placeholder", "(empty)"));
      return node;
    }
    const low = text.toLowerCase();
    if (!needle || low.length !== text.length) {
      node.textContent = text;
      return node;
    }
    let position = 0, hit;
    while ((hit = low.indexOf(needle, position)) !== -1) {
      if (hit > position) node.appendChild(document.createTextNode(text.slice(position, hit)));
      node.appendChild(el("mark", null, text.slice(hit, hit + needle.length)));
      position = hit + needle.length;
    }
    if (position < text.length) node.appendChild(document.createTextNode(text.slice(position)));
    return node;
  }
  function lazyDetails(className, summary, build) {
    const details = el("details", className);
    details.appendChild(el("summary", null, summary));
    details.addEventListener("toggle", () => {
      if (details.open && details.childNodes.length === 1) details.appendChild(build());
    });
    return details;
  }
  function pre(text) {
    return el("pre", "prompt-text", text);
  }
  function chip(text, kind) {
    const node = el("span", "chip", text);
    if (kind) node.setAttribute("data-kind", kind);
    return node;
  }
  function correctness(entry) {
    return entry.c === true ? "correct" : entry.c === false ? "incorrect" : "unscored";
  }
  function formatNumber(n) {
    return n.toLocaleString("en-US");
  }

  // ------------------------------------------------------------------ filters and URL fragment
  const controls = {};
  function buildFilters() {
    const box = document.getElementById("filters");
    for (const [name, caption] of FILTERS) {
      let options;
      if (name === "temperature") options = temperatures.map((t) => [String(t), "T=" + t]);
      else if (name === "correct") options = CORRECTNESS;
      else options = V[name].map((value) => [value, value]);
      if (name === "run" && options.length < 2) continue;
      const label = el("label", "filter");
      label.appendChild(el("span", null, caption));
      const select = el("select");
      select.name = name;
      const any = el("option", null, "any");
      any.value = "";
      select.appendChild(any);
      for (const [value, text] of options) {
        const option = el("option", null, text);
        option.value = value;
        select.appendChild(option);
      }
      select.addEventListener("change", () => update(name, select.value));
      label.appendChild(select);
      box.appendChild(label);
      controls[name] = select;
    }
    const searchLabel = el("label", "filter search");
    searchLabel.appendChild(el("span", null, "Search"));
    const search = el("input");
    search.type = "search";
    search.name = "q";
    search.placeholder = "text in queries, responses or user turns";
    let timer = null;
    search.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => update("q", search.value), 150);
    });
    searchLabel.appendChild(search);
    box.appendChild(searchLabel);
    controls.q = search;
    const reset = el("button", "reset", "Clear filters");
    reset.type = "button";
    reset.addEventListener("click", () => {
      for (const key of Object.keys(state)) state[key] = key === "page" ? 1 : "";
      syncControls();
      writeHash();
      render();
    });
    box.appendChild(reset);
  }
  function syncControls() {
    for (const [name, control] of Object.entries(controls)) control.value = state[name];
  }
  function update(name, value) {
    state[name] = value;
    state.page = 1;
    state.entry = "";
    writeHash();
    render();
  }
  function stateToHash() {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(state)) {
      if (key === "page" ? value > 1 : value) params.set(key, String(value));
    }
    return params.toString();
  }
  function readHash() {
    const raw = location.hash.replace(/^#/, "");
    if (raw && raw.indexOf("=") === -1) return false; // a plain anchor such as #plots
    const params = new URLSearchParams(raw);
    for (const key of Object.keys(state)) {
      const value = params.get(key);
      state[key] = key === "page" ? Math.max(1, parseInt(value || "1", 10) || 1) : (value || "");
    }
    return true;
  }
  function writeHash() {
    const hash = stateToHash();
    const url = location.pathname + location.search + (hash ? "#" + hash : "");
    try {
      history.replaceState(null, "", url);
    } catch (error) {
      ignoreHashChange = true;
      location.hash = hash;
    }
  }
  let ignoreHashChange = false;

  // ------------------------------------------------------------------ matching
  function valueIndex(name) {
    if (!state[name]) return -1;
    const index = V[name].indexOf(state[name]);
    return index === -1 ? -2 : index;
  }
  function matching() {
    const run = valueIndex("run"), model = valueIndex("model"), dataset = valueIndex("dataset");
    const perturbation = valueIndex("perturbation"), label = valueIndex("label");
    const temperature = state.temperature === "" ? null : parseFloat(state.temperature);
    const correct = state.correct;
    const needle = state.q.trim().toLowerCase();
    const result = [];
    let turnCount = 0;
    for (let index = 0; index < ENTRIES.length; index++) {
      const entry = ENTRIES[index];
      if ((run !== -1 && entry.r !== run) || (model !== -1 && entry.m !== model) ||
          (dataset !== -1 && entry.d !== dataset) || (perturbation !== -1 && entry.p !== perturbation) ||
          (correct && correctness(entry) !== correct)) continue;
      const entryHit = needle !== "" && (contains(entry.q, needle) || contains(entry.a, needle) ||
                                         contains(entry.ref, needle));
      const turns = [];
      for (const turnIndex of entry.turns) {
        const turn = TURNS[turnIndex];
        if (temperature !== null && turn.t !== temperature) continue;
        if (label !== -1 && turn.l !== label) continue;
        if (needle !== "" && !entryHit && !contains(turn.u, needle)) continue;
        turns.push(turnIndex);
      }
      if (turns.length) {
        result.push([index, turns]);
        turnCount += turns.length;
      }
    }
    return { result, turnCount };
  }

  // ------------------------------------------------------------------ rendering
  function renderTurn(turn, needle) {
    const item = el("li", "turn");
    const label = V.label[turn.l];
    item.setAttribute("data-label", label);
    const meta = el("div", "turn-meta");
    const badge = el("span", "label-badge", label);
    badge.setAttribute("data-label", label);
    meta.appendChild(badge);
    const facts = ["T=" + turn.t, "sample " + turn.n];
    if (turn.sd !== undefined) facts.push("seed " + turn.sd);
    if (turn.f !== undefined) facts.push("finish: " + V.finish[turn.f]);
    meta.appendChild(el("span", "facts", facts.join(" \u00b7 ")));
    item.appendChild(meta);
    item.appendChild(fillHighlighted(el("div", "text user-turn"), S[turn.u], needle));
    const reason = el("div", "reason");
    reason.appendChild(el("span", "reason-by", "classifier " + (V.classifier[turn.cl] || "?") + ": "));
    reason.appendChild(el("span", "reason-text", S[turn.r] || "(no reason given)"));
    item.appendChild(reason);
    item.appendChild(lazyDetails("prompt", "Show the exact rendered prompt", () => pre(S[turn.p])));
    return item;
  }
  function block(title, text, needle, className) {
    const section = el("div", "block " + className);
    section.appendChild(el("h4", null, title));
    section.appendChild(fillHighlighted(el("div", "text"), text, needle));
    return section;
  }
  function renderEntry(index, turnIndices, needle) {
    const entry = ENTRIES[index];
    const article = el("article", "entry");
    article.setAttribute("data-key", entry.k);
    const head = el("header", "entry-head");
    const link = el("a", "permalink", "#");
    link.href = "#entry=" + encodeURIComponent(entry.k);
    link.title = "Permalink to this entry";
    head.appendChild(link);
    head.appendChild(el("span", "entry-title", V.dataset[entry.d] + " \u00b7 " + entry.i));
    head.appendChild(chip(V.model[entry.m], "model"));
    if (V.user_model[entry.um] !== V.model[entry.m]) head.appendChild(chip("user: " + V.user_model[entry.um], "model"));
    head.appendChild(chip("perturbation: " + V.perturbation[entry.p], "perturbation"));
    const verdict = chip(correctness(entry), "correct");
    verdict.setAttribute("data-correct", correctness(entry));
    head.appendChild(verdict);
    if (V.run.length > 1) head.appendChild(chip("run: " + V.run[entry.r], "run"));
    article.appendChild(head);
    article.appendChild(block("Query", S[entry.q], needle, "query"));
    const response = block("Assistant response", S[entry.a], needle, "response");
    const facts = [];
    if (entry.af !== undefined) facts.push("finish: " + V.finish[entry.af]);
    if (entry.x !== undefined) facts.push("extracted answer: " + S[entry.x]);
    facts.push("verifier: " + correctness(entry));
    response.appendChild(el("p", "facts", facts.join(" \u00b7 ")));
    article.appendChild(response);
    article.appendChild(lazyDetails("prompt", "Show the exact assistant prompt", () => pre(S[entry.ap])));
    if (entry.ctx) {
      article.appendChild(lazyDetails("prompt", "Show the context given to the user model (perturbation: " +
                                      V.perturbation[entry.p] + ")", () => {
        const list = el("div", "context");
        for (const [role, text] of entry.ctx) {
          const message = el("div", "message");
          message.appendChild(el("span", "role", role));
          message.appendChild(el("div", "text", S[text]));
          list.appendChild(message);
        }
        return list;
      }));
    }
    if (entry.ref !== undefined) article.appendChild(block("Reference user turn (from the dataset)", S[entry.ref], needle, "reference"));
    const shown = turnIndices.length, total = entry.turns.length;
    article.appendChild(el("h4", "turns-title", "Generated user turns" +
                           (shown === total ? " (" + total + ")" : " (" + shown + " of " + total + " match the filters)")));
    const list = el("ol", "turns");
    for (const turnIndex of turnIndices) list.appendChild(renderTurn(TURNS[turnIndex], needle));
    article.appendChild(list);
    return article;
  }
  function pagerButton(text, page, enabled) {
    const button = el("button", "page-button", text);
    button.type = "button";
    button.disabled = !enabled;
    button.addEventListener("click", () => {
      state.page = page;
      writeHash();
      render();
      document.getElementById("viewer").scrollIntoView();
    });
    return button;
  }
  function renderPagers(page, pages) {
    for (const id of ["pager-top", "pager-bottom"]) {
      const pager = document.getElementById(id);
      pager.replaceChildren();
      if (pages <= 1) continue;
      pager.appendChild(pagerButton("\u00ab First", 1, page > 1));
      pager.appendChild(pagerButton("\u2039 Previous", page - 1, page > 1));
      pager.appendChild(el("span", "page-info", "Page " + page + " of " + pages));
      pager.appendChild(pagerButton("Next \u203a", page + 1, page < pages));
      pager.appendChild(pagerButton("Last \u00bb", pages, page < pages));
    }
  }
  function render() {
    const list = document.getElementById("entries");
    const status = document.getElementById("status");
    list.replaceChildren();
    status.replaceChildren();
    const needle = state.q.trim().toLowerCase();
    if (state.entry) {
      const index = entryIndex.get(state.entry);
      status.setAttribute("data-entries", index === undefined ? "0" : "1");
      status.appendChild(el("span", null, index === undefined ? "No entry with this permalink id: " + state.entry
                                                              : "Showing one entry (permalink). "));
      const all = el("button", "show-all", "Show all entries");
      all.type = "button";
      all.addEventListener("click", () => update("entry", ""));
      status.appendChild(all);
      renderPagers(1, 1);
      if (index !== undefined) {
        const article = renderEntry(index, ENTRIES[index].turns, "");
        article.classList.add("target");
        list.appendChild(article);
      }
      return;
    }
    const { result, turnCount } = matching();
    const pages = Math.max(1, Math.ceil(result.length / PAGE_SIZE));
    const page = Math.min(state.page, pages);
    const start = (page - 1) * PAGE_SIZE;
    status.setAttribute("data-entries", String(result.length));
    status.setAttribute("data-turns", String(turnCount));
    status.textContent = formatNumber(result.length) + " of " + formatNumber(ENTRIES.length) + " entries, " +
      formatNumber(turnCount) + " of " + formatNumber(TURNS.length) + " user turns match" +
      (result.length > PAGE_SIZE ? "; showing " + (start + 1) + "\u2013" + Math.min(start + PAGE_SIZE, result.length) : "") + ".";
    for (const [index, turns] of result.slice(start, start + PAGE_SIZE)) list.appendChild(renderEntry(index, turns, needle));
    renderPagers(page, pages);
  }

  // ------------------------------------------------------------------ start
  buildFilters();
  readHash();
  syncControls();
  render();
  if (state.entry) document.getElementById("viewer").scrollIntoView();
  window.addEventListener("hashchange", () => {
    if (ignoreHashChange) {
      ignoreHashChange = false;
      return;
    }
    if (!readHash()) return;
    syncControls();
    render();
    if (state.entry) document.getElementById("viewer").scrollIntoView();
  });
  window.__userturnReadyMs = performance.now();
  document.documentElement.setAttribute("data-viewer-ready", "1");
})();
