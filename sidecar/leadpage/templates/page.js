// The approval queue keeps itself fresh: every few seconds it asks for
// the queue again as HTML (GET /approvals/fragment, with the page's own
// view and filters; 304 when nothing changed) and puts it in place. A
// card whose version is unchanged is kept as it is, so a comment being
// typed and the focus stay where they were; a changed card keeps the
// comment typed into it. Without JavaScript the page is the same, and a
// reload shows what changed. No framework: this file is all of it, and
// the page's CSP allows no inline script.
(function () {
  "use strict";
  var queue = document.getElementById("queue");
  if (!queue || !window.fetch || !queue.replaceChildren) {
    return;
  }
  var url = queue.getAttribute("data-fragment");
  var every = (Number(queue.getAttribute("data-refresh")) || 5) * 1000;
  var etag = "";
  var timer = 0;

  // carry moves what the lead typed into a card's replacement.
  function carry(from, to) {
    var a = from.querySelector("input[name=comment]");
    var b = to.querySelector("input[name=comment]");
    if (a && b) {
      b.value = a.value;
    }
  }

  function merge(html) {
    var parsed = new DOMParser().parseFromString(html, "text/html").getElementById("queue");
    if (!parsed) {
      return;
    }
    var next = document.importNode(parsed, true);
    var focused = document.activeElement;
    var from = null;
    var to = null;
    if (focused && queue.contains(focused) && typeof focused.selectionStart === "number") {
      from = focused.selectionStart;
      to = focused.selectionEnd;
    }
    next.querySelectorAll("article[data-version]").forEach(function (card) {
      var old = document.getElementById(card.id);
      if (!old) {
        return;
      }
      if (old.getAttribute("data-version") === card.getAttribute("data-version")) {
        card.replaceWith(old);
      } else {
        carry(old, card);
        if (focused && old.contains(focused) && focused.id) {
          focused = card.querySelector("#" + CSS.escape(focused.id)) || focused;
        }
      }
    });
    queue.replaceChildren.apply(queue, Array.prototype.slice.call(next.childNodes));
    if (focused && focused !== document.activeElement && document.contains(focused)) {
      focused.focus();
      if (from !== null) {
        focused.setSelectionRange(from, to);
      }
    }
  }

  function poll() {
    timer = 0;
    if (document.hidden) {
      return; // visibilitychange starts it again
    }
    var headers = etag ? { "If-None-Match": etag } : {};
    fetch(url, { headers: headers, credentials: "same-origin", redirect: "manual", cache: "no-store" })
      .then(function (res) {
        if (res.type === "opaqueredirect" || res.status === 401 || res.status === 403) {
          location.reload(); // the session ended: the page says why
          return null;
        }
        if (res.status !== 200) {
          return null;
        }
        etag = res.headers.get("ETag") || "";
        return res.text();
      })
      .then(function (html) {
        if (html) {
          merge(html);
        }
      })
      .catch(function () {})
      .then(schedule);
  }

  function schedule() {
    if (!timer && !document.hidden) {
      timer = setTimeout(poll, every);
    }
  }

  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) {
      clearTimeout(timer);
      timer = 0;
      poll();
    }
  });
  schedule();
})();
