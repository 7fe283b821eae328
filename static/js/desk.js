// The little the pages need that htmx does not give, without inline script (the
// Content-Security-Policy allows scripts from this site only):
// - a form with data-confirm asks before it posts; "{action}" in the question becomes the
//   value of the form's "action" field (the bulk bar's chosen action); a submit button's
//   own data-confirm wins over its form's;
// - a button with data-clear-cell empties the table cell it sits in (an inline result);
// - the bulk bar: ticked rows narrow it to their groups, and "assign" with nobody chosen is
//   refused before any confirmation.
// Listeners sit on the document, so content htmx swaps in later works too.
"use strict";

document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement)) return;
  // A button with its own data-confirm ("Assign 5 groups to you?") asks its own question.
  const submitter = event.submitter instanceof HTMLElement ? event.submitter : null;
  const chosen = form.elements.namedItem("action");
  const value = chosen && "value" in chosen ? chosen.value : "";
  // An action that cannot be done is refused before anything is asked.
  if (refusedBeforeAsking(form, submitter, value)) {
    event.preventDefault();
    return;
  }
  const rows = chosenRows(form);
  let question = (submitter && submitter.dataset.confirm) || form.dataset.confirm;
  let named = value;
  if (rows.length && form.dataset.confirmChosen) {
    // Ticked rows: the question counts their groups, whichever button was pressed.
    question = form.dataset.confirmChosen.replace("{count}", String(groupsOf(rows)));
    if (submitter && submitter.getAttribute("name") === "assign_to_me") named = "assign";
  }
  if (!question) return;
  if (!window.confirm(question.replace("{action}", named))) {
    event.preventDefault();
  }
});

// The bulk bar: "assign" with nobody chosen says so at once (the server refuses it too).
function refusedBeforeAsking(form, submitter, action) {
  const needs = form.dataset.needsAssignee;
  const assignee = form.elements.namedItem("assignee");
  if (!needs || action !== "assign" || !(assignee instanceof HTMLSelectElement)) return false;
  if (assignee.value || (submitter && submitter.getAttribute("name") === "assign_to_me")) {
    return false;
  }
  let note = form.querySelector(".bulk-refused");
  if (!note) {
    note = document.createElement("p");
    note.className = "form-errors bulk-refused";
    note.setAttribute("role", "alert");
    form.prepend(note);
  }
  note.textContent = needs;
  assignee.setAttribute("aria-invalid", "true");
  assignee.focus();
  return true;
}

// Ticked rows narrow the bulk bar to their groups; none ticked, it acts on all it shows.
function chosenRows(form) {
  if (!form.id) return [];
  return Array.from(document.querySelectorAll(`input.choose-row[form="${form.id}"]:checked`));
}

function groupsOf(rows) {
  return rows.reduce((sum, box) => sum + Number(box.dataset.groups || "0"), 0);
}

document.addEventListener("change", (event) => {
  const box = event.target;
  if (!(box instanceof HTMLInputElement) || !box.classList.contains("choose-row")) return;
  const form = document.getElementById(box.getAttribute("form") || "");
  if (!(form instanceof HTMLFormElement)) return;
  const count = form.elements.namedItem("confirm_count");
  if (!(count instanceof HTMLInputElement)) return;
  if (!count.dataset.all) count.dataset.all = count.value;
  const rows = chosenRows(form);
  const scope = form.querySelector(".bulk-scope");
  const said = form.querySelector(".bulk-chosen");
  count.value = rows.length ? String(groupsOf(rows)) : count.dataset.all;
  if (scope) scope.hidden = rows.length > 0;
  form.querySelectorAll("button[data-label-chosen]").forEach((button) => {
    if (!button.dataset.labelAll) button.dataset.labelAll = button.textContent || "";
    button.textContent = rows.length ? button.dataset.labelChosen : button.dataset.labelAll;
  });
  if (said instanceof HTMLElement) {
    said.hidden = rows.length === 0;
    said.textContent = (said.dataset.template || "")
      .replace("{count}", String(groupsOf(rows)))
      .replace("{rows}", String(rows.length));
  }
});

document.addEventListener("change", (event) => {
  const select = event.target;
  if (select instanceof HTMLSelectElement && select.name === "assignee" && select.value) {
    select.removeAttribute("aria-invalid");
    const note = select.form && select.form.querySelector(".bulk-refused");
    if (note) note.remove();
  }
});

document.addEventListener("click", (event) => {
  const target = event.target instanceof Element ? event.target : null;
  const button = target ? target.closest("[data-clear-cell]") : null;
  const cell = button ? button.closest("td") : null;
  if (cell) cell.replaceChildren();
});

// Keyboard shortcuts of the triage and group pages (a page opts in by including
// templates/shortcuts.html, whose dialog carries data-shortcuts): "/" search, "j"/"k" move between rows, "a"
// acknowledge, "r" resolve, "?" lists them. None fires while a person types in a field,
// nor with Ctrl, Alt or Meta held (the browser's own shortcuts stay theirs).
const ROW_SELECTOR = "[data-shortcut-row]";

function typing(target) {
  if (!(target instanceof Element)) return false;
  return Boolean(target.closest("input, textarea, select, [contenteditable=''], [contenteditable=true]"));
}

function shortcutRows() {
  return Array.from(document.querySelectorAll(ROW_SELECTOR));
}

function currentRow() {
  return document.querySelector(`${ROW_SELECTOR}.is-current`);
}

function moveRow(step) {
  const rows = shortcutRows();
  if (!rows.length) return;
  const index = rows.indexOf(currentRow());
  const next = rows[Math.min(rows.length - 1, Math.max(0, index < 0 ? 0 : index + step))];
  rows.forEach((row) => row.classList.remove("is-current"));
  next.classList.add("is-current");
  const focusable = next.querySelector("a[href]") || next;
  if (focusable === next) next.setAttribute("tabindex", "-1");
  focusable.focus({ preventScroll: true });
  next.scrollIntoView({ block: "nearest" });
}

// On the triage page "a" and "r" act on the chosen row's groups through the bulk action,
// after a confirmation that names how many (a row of the group view: its one group, named);
// on the group page they press its own button.
function actOnRow(action) {
  const row = currentRow();
  const form = document.getElementById("row-action");
  if (!row || !form) return false;
  const count = Number(row.dataset.groups || "0");
  const group = row.dataset.group || "";
  const key = action === "resolve" ? "confirmResolve" : "confirmAcknowledge";
  const question = group
    ? form.dataset[`${key}Group`].replace("{group}", row.dataset.name || "")
    : form.dataset[key].replace("{count}", String(count)).replace("{reason}", row.dataset.reason || "");
  if (!count || !window.confirm(question)) return true;
  const query = new URLSearchParams(form.dataset.query || "");
  query.set("stage", row.dataset.stage || "");
  query.set("reason", row.dataset.reason || "");
  form.elements.namedItem("query").value = query.toString();
  form.elements.namedItem("confirm_count").value = String(count);
  form.elements.namedItem("action").value = action;
  const groups = form.elements.namedItem("groups");
  groups.value = group;
  groups.disabled = !group;
  form.submit();
  return true;
}

function pressButton(key) {
  const button = document.querySelector(`[data-shortcut="${key}"]`);
  if (!button) return false;
  button.click();
  return true;
}

function search() {
  const field = document.querySelector("[data-shortcut-search]");
  if (field instanceof HTMLInputElement) {
    field.focus();
    field.select();
    return true;
  }
  // The group page has no search of its own: "/" goes to the triage page's.
  const link = document.querySelector("[data-shortcut-search-link]");
  if (link instanceof HTMLAnchorElement) {
    window.location.assign(`${link.href}#search`);
    return true;
  }
  return false;
}

function toggleHelp() {
  const dialog = document.getElementById("shortcuts");
  if (!(dialog instanceof HTMLDialogElement)) return false;
  if (dialog.open) dialog.close();
  else dialog.showModal();
  return true;
}

document.addEventListener("keydown", (event) => {
  if (!document.querySelector("[data-shortcuts]")) return;
  if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing) return;
  if (typing(event.target)) return;
  const help = document.getElementById("shortcuts");
  if (help instanceof HTMLDialogElement && help.open && event.key !== "?") return;
  const handlers = {
    "/": search,
    "?": toggleHelp,
    j: () => { moveRow(1); return true; },
    k: () => { moveRow(-1); return true; },
    a: () => actOnRow("acknowledge") || pressButton("a"),
    r: () => actOnRow("resolve") || pressButton("r"),
  };
  const handler = handlers[event.key];
  if (handler && handler()) event.preventDefault();
});

document.addEventListener("click", (event) => {
  const target = event.target instanceof Element ? event.target : null;
  if (target && target.closest("[data-shortcuts-open]")) {
    event.preventDefault();
    toggleHelp();
  }
});

// Arriving from the group page's "/": the triage search has the focus.
document.addEventListener("DOMContentLoaded", () => {
  if (window.location.hash === "#search") search();
});

// --- the person's time zone ------------------------------------------------------------------
// The server shows times in the zone the person chose, or else in the browser's, which it
// learns from this cookie. When the cookie was missing or stale (first visit, travel), the
// page is shown again in the right zone at once: once, and only a page a GET showed.
(() => {
  let zone = "";
  try {
    zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
  } catch (error) {
    return;
  }
  // IANA names ("Asia/Seoul", "America/Argentina/Buenos_Aires", "Etc/GMT+9") need no escaping.
  if (!/^[A-Za-z0-9_+\-/]{1,64}$/.test(zone)) return;
  const sent = document.cookie.split("; ").find((item) => item.startsWith("desk_tz="));
  if (sent && sent.slice("desk_tz=".length) === zone) return;
  const secure = window.location.protocol === "https:" ? "; Secure" : "";
  document.cookie = `desk_tz=${zone}; path=/; max-age=31536000; SameSite=Lax${secure}`;
  const root = document.documentElement;
  if (
    root.hasAttribute("data-time-zone-reload") &&
    root.dataset.timeZoneSource !== "chosen" &&
    root.dataset.timeZone !== zone
  ) {
    window.location.reload();
  }
})();

// --- auto-refresh of the triage table --------------------------------------------------------
// The "refresh now" link (#auto-refresh) also fires on a timer (hx-trigger "every 10s"). A
// timed refresh waits while the person is busy with the page: typing or choosing in a form,
// selecting text in the table, or having started to fill the bulk bar; and while the tab
// is hidden. A click on the link always refreshes.
function formIsChanged(form) {
  for (const element of form.elements) {
    if (element instanceof HTMLSelectElement) {
      const chosen = Array.from(element.options).findIndex((option) => option.defaultSelected);
      if (element.selectedIndex !== Math.max(chosen, 0)) return true;
    } else if (element instanceof HTMLInputElement) {
      if (element.type === "hidden" || element.type === "submit") continue;
      if (element.type === "checkbox" || element.type === "radio") {
        if (element.checked !== element.defaultChecked) return true;
      } else if (element.value !== element.defaultValue) return true;
    } else if (element instanceof HTMLTextAreaElement) {
      if (element.value !== element.defaultValue) return true;
    }
  }
  return false;
}

const TYPED = "textarea, input:not([type=hidden]):not([type=submit]):not([type=checkbox]):not([type=radio])";

function personIsBusy(results) {
  const active = document.activeElement;
  const bulk = results.querySelector("form.bulkbar");
  // Typing anywhere (a search not yet sent), or anything in the bulk bar the refresh would reset.
  if (active && active.matches(TYPED)) return true;
  if (active && bulk && bulk.contains(active)) return true;
  const selection = document.getSelection();
  if (selection && !selection.isCollapsed && results.contains(selection.anchorNode)) return true;
  return Boolean(bulk && formIsChanged(bulk));
}

document.addEventListener("htmx:confirm", (event) => {
  const link = event.target;
  if (!(link instanceof HTMLElement) || link.id !== "auto-refresh") return;
  if (event.detail.triggeringEvent) return; // a click, not the timer
  const results = document.getElementById("results");
  const state = document.getElementById("refresh-state");
  if (document.hidden || (results && personIsBusy(results))) {
    event.preventDefault();
    if (state && state.dataset.paused && !document.hidden) {
      state.textContent = state.dataset.paused;
      state.classList.add("paused");
    }
  }
});

// --- history that matches the page -----------------------------------------------------------
// One entry per change: a filter request for the view already shown (a search field fires
// "search", "change" and "submit" for one Enter) replaces the entry instead of adding one.
document.addEventListener("htmx:beforeHistoryUpdate", (event) => {
  const update = event.detail.history;
  if (!update || update.type !== "push") return;
  const next = new URL(update.path, window.location.href);
  if (next.pathname + next.search === window.location.pathname + window.location.search) {
    update.type = "replace";
  }
});

// Back (or Forward) restores a page htmx kept: its results are those of that view, but its
// filter inputs are whatever they held when htmx kept it. The results say what their inputs
// were (data-form-state): put them back, so inputs, results and the bulk bar agree.
document.addEventListener("htmx:historyRestore", () => {
  const results = document.getElementById("results");
  const form = document.getElementById("filters");
  if (!results || !(form instanceof HTMLFormElement) || !results.dataset.formState) return;
  const shown = JSON.parse(results.dataset.formState);
  for (const [name, value] of Object.entries(shown)) {
    const element = form.elements.namedItem(name);
    if (element && "value" in element) element.value = value;
  }
});

// Choosing how long to mute in the bulk bar means muting: its action follows, so a preset
// picked with "acknowledge" still selected cannot acknowledge instead.
document.addEventListener("change", (event) => {
  const field = event.target;
  if (!(field instanceof HTMLElement) || !field.matches("[name=mute_for], [name=muted_until]")) return;
  const form = field.closest("form");
  const action = form ? form.elements.namedItem("action") : null;
  if (action instanceof HTMLSelectElement && "value" in field && field.value) action.value = "mute";
});
