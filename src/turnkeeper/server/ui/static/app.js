// turnkeeper UI: the little script on top of server-rendered pages (no build step).
// - forms with data-confirm ask before they submit;
// - the context budget bar takes its width from data-width (the CSP allows no inline style);
// - the chat box streams the model's reply (server-sent events over fetch);
// - the transcript polls for messages others append, every 2 s, with ?after_seq=.
// Message text is never inserted as HTML here: only server-rendered (escaped) fragments are.
"use strict";

(function () {
  const POLL_MS = 2000;

  document.querySelectorAll("form[data-confirm]").forEach((form) => {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  });

  document.querySelectorAll("[data-width]").forEach((el) => {
    el.style.width = el.dataset.width + "%";
  });

  const transcript = document.getElementById("transcript");
  if (!transcript) return;
  const session = transcript.dataset.session;
  const base = "/sessions/" + encodeURIComponent(session);
  let inflight = null;
  // Once the page is being left (a form posted: Delete, Archive…), a poll's answer is not
  // acted on: a 404 for the session just deleted would reload this page over the answer the
  // user asked for, landing on "Not found" instead of the list.
  let leaving = false;
  window.addEventListener("beforeunload", () => { leaving = true; });

  function atBottom() {
    return window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
  }

  function append(html) {
    const template = document.createElement("template");
    template.innerHTML = html;
    const stats = template.content.getElementById("stats");
    const current = document.getElementById("stats");
    if (stats && current) current.replaceWith(stats);
    const follow = atBottom();
    let added = 0;
    template.content.querySelectorAll("[data-seq]").forEach((node) => {
      if (transcript.querySelector('[data-seq="' + node.dataset.seq + '"]')) return;
      transcript.insertBefore(node, transcript.querySelector(".empty-transcript"));
      added += 1;
    });
    if (added) {
      const empty = transcript.querySelector(".empty-transcript");
      if (empty) empty.hidden = true;
      if (follow) window.scrollTo(0, document.body.scrollHeight);
    }
  }

  function poll() {
    // One request at a time: a tick that finds one running shares it.
    if (!inflight) inflight = pollOnce().finally(() => { inflight = null; });
    return inflight;
  }

  async function pollFresh() {
    // A poll that starts after now (one already running may predate a just-stored message).
    if (inflight) await inflight;
    return poll();
  }

  async function pollOnce() {
    try {
      const url = base + "/messages?after_seq=" + transcript.dataset.lastSeq +
        "&internal=" + transcript.dataset.internal;
      const response = await fetch(url, { headers: { Accept: "text/html" }, credentials: "same-origin" });
      if (leaving) return;
      if (response.headers.get("X-Reload") || response.status === 404 || response.redirected) {
        window.location.reload();
        return;
      }
      if (!response.ok) return;
      append(await response.text());
      transcript.dataset.lastSeq = response.headers.get("X-Last-Seq") || transcript.dataset.lastSeq;
    } catch (error) {
      // The server may be restarting: try again on the next tick.
    }
  }
  window.setInterval(poll, POLL_MS);

  const form = document.getElementById("chat-form");
  if (!form) return;
  const input = document.getElementById("chat-input");
  const status = document.getElementById("chat-status");
  const button = form.querySelector("button");

  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      form.requestSubmit();
    }
  });

  function draft(role, text) {
    const bubble = document.createElement("article");
    bubble.className = "msg role-" + role + " pending";
    const head = document.createElement("header");
    head.className = "msg-head";
    const who = document.createElement("span");
    who.className = "author";
    who.textContent = role === "user" ? "User" : "Assistant";
    head.appendChild(who);
    const body = document.createElement("div");
    body.className = "md streaming";
    body.textContent = text;
    bubble.append(head, body);
    transcript.insertBefore(bubble, transcript.querySelector(".empty-transcript"));
    return body;
  }

  function events(buffer, onEvent) {
    // Split complete "event: x\ndata: y\n\n" blocks off the buffer; return the rest.
    let at;
    while ((at = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, at);
      buffer = buffer.slice(at + 2);
      let name = "message";
      let data = "";
      block.split("\n").forEach((line) => {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      });
      if (data) onEvent(name, JSON.parse(data));
    }
    return buffer;
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const content = input.value;
    if (!content.trim()) return;
    input.value = "";
    button.disabled = true;
    status.textContent = "The model is answering…";
    const drafts = [draft("user", content)];
    const reply = draft("assistant", "");
    drafts.push(reply);
    let failed = null;
    try {
      const response = await fetch(base + "/chat", {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
        body: JSON.stringify({ content: content }),
      });
      if (!response.ok) {
        failed = (await response.text()) || response.statusText;
      } else {
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer = events(buffer + decoder.decode(value, { stream: true }), (name, data) => {
            if (name === "delta") reply.textContent += data.content;
            else if (name === "error") failed = data.detail;
          });
        }
      }
    } catch (error) {
      failed = String(error);
    }
    status.textContent = failed ? "The model failed: " + failed + " (your message is saved)." : "";
    status.classList.toggle("error", Boolean(failed));
    await pollFresh(); // the stored messages, rendered by the server, replace the drafts
    drafts.forEach((node) => node.closest("article").remove());
    button.disabled = false;
    input.focus();
  });
})();
