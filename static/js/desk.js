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
