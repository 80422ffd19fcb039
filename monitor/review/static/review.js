// rag-monitor review: keyboard shortcuts, and saving through the JSON API.
// Plain JavaScript, no build step. Without it the pages work as plain forms and links.
"use strict";

(function () {
  const page = document.body.dataset.page;

  function typing(event) {
    const t = event.target;
    return t && (t.tagName === "TEXTAREA" || (t.tagName === "INPUT" && t.type !== "radio")
      || t.tagName === "SELECT");
  }

  if (page === "queue") {
    const rows = Array.from(document.querySelectorAll("table.queue tbody tr"));
    let at = rows.length ? 0 : -1;
    const mark = () => rows.forEach((r, i) => r.classList.toggle("current", i === at));
    mark();
    document.addEventListener("keydown", (event) => {
      if (typing(event) || event.ctrlKey || event.metaKey || event.altKey || at < 0) return;
      if (event.key === "j") { at = Math.min(at + 1, rows.length - 1); mark(); rows[at].scrollIntoView({block: "nearest"}); }
      else if (event.key === "k") { at = Math.max(at - 1, 0); mark(); rows[at].scrollIntoView({block: "nearest"}); }
      else if (event.key === "Enter" || event.key === "o") { window.location.href = rows[at].dataset.href; }
      else return;
      event.preventDefault();
    });
    return;
  }
  if (page !== "row") return;

  const form = document.getElementById("review");
  const banner = document.getElementById("banner");
  const groups = Array.from(document.querySelectorAll("fieldset.verdict"));
  let current = 0;
  const showCurrent = () => groups.forEach((g, i) => g.classList.toggle("current", i === current));
  showCurrent();
  groups.forEach((g, i) => g.addEventListener("click", () => { current = i; showCurrent(); }));

  function say(kind, text) {
    banner.hidden = false;
    banner.className = "banner " + kind;
    banner.textContent = text;
  }

  function body(discard) {
    const data = new FormData(form);
    const verdicts = [];
    for (const [key, value] of data.entries()) {
      const m = /^verdict-(\d+)-([a-z_]+)$/.exec(key);
      if (!m || !value) continue;
      verdicts.push({interaction_id: data.get("answer-" + m[1]), reason: m[2], verdict: value});
    }
    return {
      version: Number(data.get("version")),
      reference: data.get("reference"),
      note: data.get("note"),
      verdicts: verdicts,
      discard: discard,
    };
  }

  function describe(row) {
    const verdicts = [];
    row.answers.forEach((a, i) => a.verdicts.forEach((v) =>
      verdicts.push("answer " + (i + 1) + " " + v.reason + ": " + v.verdict.replace("_", " ") + " by " + v.reviewer)));
    return "Conflict: another reviewer saved this row first. The newer state (version " + row.version
      + "): reference " + JSON.stringify(row.reference || "(none)") + "; verdicts: "
      + (verdicts.join("; ") || "(none)") + ". Your input is kept in the form; save again to replace it.";
  }

  async function save(discard) {
    let response;
    try {
      response = await fetch(form.dataset.api, {
        method: "POST",
        headers: {"Content-Type": "application/json", "X-CSRF-Token": form.elements.csrf.value},
        body: JSON.stringify(body(discard)),
        credentials: "same-origin",
      });
    } catch (err) {
      say("error", "Could not reach the server; nothing was saved.");
      return;
    }
    const answer = await response.json().catch(() => ({}));
    if (response.ok) {
      form.elements.version.value = answer.version;
      window.location.href = form.dataset.next;
    } else if (response.status === 409 && answer.row) {
      form.elements.version.value = answer.row.version;
      document.getElementById("version-shown").textContent = answer.row.version;
      say("conflict", describe(answer.row));
    } else {
      say("error", (answer.field ? answer.field + ": " : "") + (answer.error || ("HTTP " + response.status)));
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const discard = event.submitter && event.submitter.value === "discard";
    save(discard);
  });

  document.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      save(false);
      return;
    }
    if (event.key === "Escape" && typing(event)) { event.target.blur(); return; }
    if (typing(event) || event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === "j") { window.location.href = document.getElementById("next").href; }
    else if (event.key === "k") { window.location.href = document.getElementById("prev").href; }
    else if (event.key === "e") { document.getElementById("reference").focus(); }
    else if (["1", "2", "3"].includes(event.key) && groups.length) {
      const radios = groups[current].querySelectorAll("input[type=radio]");
      radios[Number(event.key) - 1].checked = true;
      current = Math.min(current + 1, groups.length - 1);
      showCurrent();
    } else return;
    event.preventDefault();
  });
})();
