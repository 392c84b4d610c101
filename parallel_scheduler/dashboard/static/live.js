/* parallel-scheduler dashboard: live.js, the dashboard's only script (no build step, no library).
 * SPDX-License-Identifier: MIT (the project's licence: see LICENSE at the repository's root).
 * Copyright (c) 2026 parallel-scheduler developers.
 *
 * Served from 'self' under the Content-Security-Policy (script-src 'self'; connect-src 'self').
 * It does four things, and the pages work without it:
 *
 * 1. The viewer's time zone: when none was chosen yet (<body data-zone-chosen="no">), the
 *    browser's own zone is asked for once with ?tz=..., which the server remembers in the session.
 * 2. Live updates, on every page. A page whose <body> has data-live-seconds (the Overview, the
 *    Jobs list) has every element with data-live (and an id) replaced every few seconds by the
 *    same element of the page fetched again (same origin, same credentials); the health banner
 *    is one of them. Every other page refreshes only the banner, from data-health-url (a
 *    fragment holding just it). A button pauses and resumes it on every page; the choice is
 *    remembered. While the person is using the page (the focus in a form field, a box ticked or a
 *    field changed inside a live part) its live parts wait and only the banner is refreshed.
 *    What arrives is parsed as an inert document and its elements moved in: never run, never
 *    written as markup, so it is as escaped as the server made it.
 * 3. On the Jobs page, one box ticks (or clears) every job's box of the page.
 * 4. Every time zone list (a <select> with <optgroup class="zone-region">) gets a filter box: what
 *    is typed narrows the list to the zones whose names hold it ("new york", "tokyo", "europe/").
 */
(function () {
  "use strict";
  var body = document.body;
  var KEY = "parallel-scheduler-live-paused";
  var UTC_NAMES = ["UTC", "Etc/UTC", "Etc/GMT", "GMT", "Etc/Universal", "Universal", "Etc/Zulu", "Zulu"];
  // Fields a person types into or picks from (a tick box counts once ticked: see inUse).
  var TYPED = "select, textarea, input:not([type=checkbox]):not([type=radio]):not([type=submit]):not([type=button]):not([type=hidden])";

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

  function changed(field) {
    if (field.type === "hidden" || field.type === "submit" || field.type === "button") return false;
    if (field.type === "checkbox" || field.type === "radio") return field.checked !== field.defaultChecked;
    if (field.tagName === "SELECT") {
      var options = Array.prototype.slice.call(field.options);
      var chosen = options.some(function (o) { return o.defaultSelected; });
      // no option marked selected: a single list starts on its first one
      if (!chosen && !field.multiple) return field.selectedIndex > 0;
      return options.some(function (o) { return o.selected !== o.defaultSelected; });
    }
    return field.value !== field.defaultValue;
  }

  // Why the page's live parts must wait ("" when they need not): the person is typing in a form,
  // or has ticked jobs or changed a field that a refresh would put back.
  function inUse() {
    var active = document.activeElement;
    if (active && active !== body && active.matches(TYPED)) return "a form field is in use";
    var fields = document.querySelectorAll("[data-live] input, [data-live] select, [data-live] textarea");
    return Array.prototype.some.call(fields, changed) ? "jobs are ticked" : "";
  }

  function fetchDocument(url) {
    return fetch(url, { credentials: "same-origin", cache: "no-store", headers: { Accept: "text/html" } })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.text();
      })
      .then(function (text) {
        return new DOMParser().parseFromString(text, "text/html");
      });
  }

  function replaceParts(fresh, selector) {
    document.querySelectorAll(selector).forEach(function (old) {
      var next = fresh.getElementById(old.id);
      if (next) old.replaceWith(document.importNode(next, true));
    });
  }

  function readPaused() {
    try {
      return window.localStorage.getItem(KEY) === "yes";
    } catch (e) {
      return false;
    }
  }

  function writePaused(paused) {
    try {
      window.localStorage.setItem(KEY, paused ? "yes" : "no");
    } catch (e) {
      /* storage refused (private mode): the choice lasts for this page */
    }
  }

  function liveUpdates(afterRefresh) {
    var pageSeconds = Number(body.dataset.liveSeconds) || 0;
    var healthUrl = body.dataset.healthUrl || "";
    var seconds = pageSeconds || Number(body.dataset.healthSeconds) || 0;
    var toggle = document.getElementById("live-toggle");
    var status = document.getElementById("live-status");
    if (!toggle || !seconds || (!pageSeconds && !healthUrl)) return;
    var paused = readPaused();
    var busy = false;

    function show(text) {
      toggle.textContent = paused ? "Resume live updates" : "Pause live updates";
      toggle.setAttribute("aria-pressed", paused ? "true" : "false");
      if (status && text) status.textContent = text;
    }

    function refresh() {
      if (paused || busy || document.hidden) return;
      var waiting = pageSeconds ? inUse() : "";
      var whole = pageSeconds && !waiting;
      if (!whole && !healthUrl) {
        show("waiting: " + waiting);
        return;
      }
      busy = true;
      fetchDocument(whole ? window.location.href : healthUrl)
        .then(function (fresh) {
          replaceParts(fresh, whole ? "[data-live][id]" : "#health-slot");
          afterRefresh();
          var at = new Date().toLocaleTimeString();
          show(waiting ? "banner updated " + at + "; the rest waits: " + waiting : "updated " + at);
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
      writePaused(paused);
      show(paused ? "paused" : "live");
      if (!paused) refresh();
    });
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden) refresh();
    });
    show(paused ? "paused" : "live every " + seconds + " s");
    window.setInterval(refresh, seconds * 1000);
  }

  // The "tick every job" box: shown (it is hidden without the script), also after a refresh
  // brought a new one; one listener for whichever box is there.
  function pickAll() {
    document.addEventListener("change", function (event) {
      var all = event.target;
      if (!all || all.id !== "pick-all") return;
      document.querySelectorAll("input.pick").forEach(function (box) {
        box.checked = all.checked;
      });
    });
    function reveal() {
      var all = document.getElementById("pick-all");
      if (all) all.hidden = false;
    }
    reveal();
    return reveal;
  }

  function zoneKey(text) {
    return text.toLowerCase().replace(/_/g, " ").replace(/\s+/g, " ");
  }

  // A filter box before one zone list. The list's parts (the options outside any group, then each
  // group with its options) are remembered once; each keystroke puts back those that match.
  function zoneFilter(select) {
    var parts = Array.prototype.map.call(select.children, function (child) {
      return { node: child, options: child.tagName === "OPTGROUP" ? Array.prototype.slice.call(child.children) : [] };
    });
    var box = document.createElement("input");
    box.type = "search";
    box.className = "zone-filter";
    if (select.id) box.id = select.id + "-filter";
    box.placeholder = "filter zones";
    box.autocomplete = "off";
    box.setAttribute("aria-label", "Filter the time zones (e.g. tokyo, new york, europe/)");
    box.setAttribute("aria-controls", select.id || "");
    var wrap = document.createElement("span");
    wrap.className = "zone-pick";
    select.parentNode.insertBefore(wrap, select);
    wrap.appendChild(box);
    wrap.appendChild(select);

    function matches(option, wanted) {
      return !wanted || zoneKey(option.value).indexOf(wanted) >= 0;
    }

    box.addEventListener("input", function () {
      var wanted = zoneKey(box.value.trim());
      var current = select.value;
      var found = 0;
      parts.forEach(function (part) {
        if (part.node.tagName !== "OPTGROUP") {
          if (matches(part.node, wanted)) {
            select.appendChild(part.node);
            found += 1;
          } else {
            part.node.remove();
          }
          return;
        }
        part.options.forEach(function (option) {
          if (matches(option, wanted)) {
            part.node.appendChild(option);
            found += 1;
          } else {
            option.remove();
          }
        });
        if (part.node.children.length) select.appendChild(part.node);
        else part.node.remove();
      });
      if (!found) {
        // nothing matches: keep the zone chosen, alone, so the form never sends none
        parts.forEach(function (part) {
          var kept = part.node.tagName === "OPTGROUP" ? part.options : [part.node];
          kept.forEach(function (option) {
            if (option.value !== current) return;
            if (part.node !== option) {
              part.node.appendChild(option);
            }
            select.appendChild(part.node);
          });
        });
      }
      var kept = Array.prototype.some.call(select.options, function (o) { return o.value === current; });
      if (kept) select.value = current;
      else select.selectedIndex = 0;
      box.setAttribute("aria-invalid", found ? "false" : "true");
      box.title = found ? found + " zones" : "no zone matches";
    });
  }

  function zoneFilters() {
    document.querySelectorAll("select").forEach(function (select) {
      if (select.querySelector("optgroup.zone-region")) zoneFilter(select);
    });
  }

  if (!offerZone()) {
    zoneFilters();
    liveUpdates(pickAll());
  }
})();
