// The confirmation page's one click done for the reader: the page confirms only by POST (a link
// scanner that fetches the mail's link changes nothing), and this submits its form once the page
// is actually shown to someone. Without scripts the page keeps its button. Our own code, served
// from our own static files.
(function () {
  "use strict";
  const form = document.querySelector("form[data-auto-submit]");
  if (!form) return;
  let sent = false;
  function submit() {
    if (sent || document.visibilityState !== "visible") return;
    sent = true;
    const button = form.querySelector("button");
    if (button) button.disabled = true;
    form.submit();
  }
  document.addEventListener("visibilitychange", submit);
  submit();
})();
