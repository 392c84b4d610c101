/* parallel-scheduler dashboard: live.js, the dashboard's only script (no build step, no library).
 * SPDX-License-Identifier: MIT (the project's licence: see LICENSE at the repository's root).
 * Copyright (c) 2026 parallel-scheduler developers.
 *
 * Served from 'self' under the Content-Security-Policy (script-src 'self'; connect-src 'self').
 * It does two things, and the pages work without it:
 *
 * 1. The viewer's time zone: when none was chosen yet (<body data-zone-chosen="no">), the
 *    browser's own zone is asked for once with ?tz=..., which the server remembers in the session.
 * 2. Live regions: on a page whose <body> has data-live-seconds, every element with data-live
 *    (and an id) is replaced every few seconds by the same element of the page fetched again
 *    (same origin, same credentials). A button pauses and resumes it; the choice is remembered.
 * 3. On the Jobs page, one box ticks (or clears) every job's box of the page.
 */
(function () {
  "use strict";
  var body = document.body;
  var KEY = "parallel-scheduler-live-paused";
  var UTC_NAMES = ["UTC", "Etc/UTC", "Etc/GMT", "GMT", "Etc/Universal", "Universal", "Etc/Zulu", "Zulu"];

  function browserZone() {
    try {
      return Intl.DateTimeFormat().resolvedOptions().timeZone || "";
    } catch (e) {
      return "";
    }
  }

  function offerZone() {
    if (body.dataset.zoneChosen !== "no") return false;
    var zone = browserZone();
    var shown = body.dataset.zone || "UTC";
    if (!zone || zone === shown || (UTC_NAMES.indexOf(zone) >= 0 && shown === "UTC")) return false;
    var select = document.getElementById("zone-select");
    if (!select || !Array.prototype.some.call(select.options, function (o) { return o.value === zone; })) {
      return false;
    }
    var url = new URL(window.location.href);
    url.searchParams.set("tz", zone);
    window.location.replace(url.toString());
    return true;
  }

  function liveRegions() {
    var seconds = Number(body.dataset.liveSeconds);
    var toggle = document.getElementById("live-toggle");
    var status = document.getElementById("live-status");
    if (!seconds || !toggle) return;
    var paused = window.localStorage && window.localStorage.getItem(KEY) === "yes";
    var busy = false;

    function show(text) {
      toggle.textContent = paused ? "Resume live updates" : "Pause live updates";
      toggle.setAttribute("aria-pressed", paused ? "true" : "false");
      if (status && text) status.textContent = text;
    }

    function refresh() {
      if (paused || busy || document.hidden) return;
      busy = true;
      fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (response) {
          if (!response.ok) throw new Error("HTTP " + response.status);
          return response.text();
        })
        .then(function (text) {
          var fresh = new DOMParser().parseFromString(text, "text/html");
          document.querySelectorAll("[data-live][id]").forEach(function (old) {
            var next = fresh.getElementById(old.id);
            if (next) old.replaceWith(document.importNode(next, true));
          });
          show("updated " + new Date().toLocaleTimeString());
        })
        .catch(function (error) {
          show("update failed (" + error.message + "); retrying");
        })
        .finally(function () {
          busy = false;
        });
    }

    toggle.hidden = false;
    toggle.addEventListener("click", function () {
      paused = !paused;
      if (window.localStorage) window.localStorage.setItem(KEY, paused ? "yes" : "no");
      show(paused ? "paused" : "live");
      if (!paused) refresh();
    });
    show(paused ? "paused" : "live every " + seconds + " s");
    window.setInterval(refresh, seconds * 1000);
  }

  function pickAll() {
    var all = document.getElementById("pick-all");
    if (!all) return;
    all.hidden = false;
    all.addEventListener("change", function () {
      document.querySelectorAll("input.pick").forEach(function (box) {
        box.checked = all.checked;
      });
    });
  }

  if (!offerZone()) {
    liveRegions();
    pickAll();
  }
})();
