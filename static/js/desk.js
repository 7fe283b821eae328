// The little the pages need that htmx does not give, without inline script (the
// Content-Security-Policy allows scripts from this site only):
// - a form with data-confirm asks before it posts; "{action}" in the question becomes the
//   value of the form's "action" field (the bulk bar's chosen action);
// - a button with data-clear-cell empties the table cell it sits in (an inline result).
// Listeners sit on the document, so content htmx swaps in later works too.
"use strict";

document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.dataset.confirm) return;
  const chosen = form.elements.namedItem("action");
  const value = chosen && "value" in chosen ? chosen.value : "";
  if (!window.confirm(form.dataset.confirm.replace("{action}", value))) {
    event.preventDefault();
  }
});

document.addEventListener("click", (event) => {
  const target = event.target instanceof Element ? event.target : null;
  const button = target ? target.closest("[data-clear-cell]") : null;
  const cell = button ? button.closest("td") : null;
  if (cell) cell.replaceChildren();
});
