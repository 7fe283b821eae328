// The little the pages need that htmx does not give, without inline script (the
// Content-Security-Policy allows scripts from this site only):
// - a form with data-confirm asks before it posts; "{action}" in the question becomes the
//   value of the form's "action" field (the bulk bar's chosen action); a submit button's
//   own data-confirm wins over its form's;
// - a button with data-clear-cell empties the table cell it sits in (an inline result).
// Listeners sit on the document, so content htmx swaps in later works too.
"use strict";

document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement)) return;
  // A button with its own data-confirm ("Assign 5 groups to you?") asks its own question.
  const submitter = event.submitter instanceof HTMLElement ? event.submitter : null;
  const question = (submitter && submitter.dataset.confirm) || form.dataset.confirm;
  if (!question) return;
  const chosen = form.elements.namedItem("action");
  const value = chosen && "value" in chosen ? chosen.value : "";
  if (!window.confirm(question.replace("{action}", value))) {
    event.preventDefault();
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
// after a confirmation that names how many; on the group page they press its own button.
function actOnRow(action) {
  const row = currentRow();
  const form = document.getElementById("row-action");
  if (!row || !form) return false;
  const count = Number(row.dataset.groups || "0");
  const question = form.dataset[action === "resolve" ? "confirmResolve" : "confirmAcknowledge"]
    .replace("{count}", String(count))
    .replace("{reason}", row.dataset.reason || "");
  if (!count || !window.confirm(question)) return true;
  const query = new URLSearchParams(form.dataset.query || "");
  query.set("stage", row.dataset.stage || "");
  query.set("reason", row.dataset.reason || "");
  form.elements.namedItem("query").value = query.toString();
  form.elements.namedItem("confirm_count").value = String(count);
  form.elements.namedItem("action").value = action;
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
