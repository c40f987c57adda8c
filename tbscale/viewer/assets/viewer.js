/* tbscale trajectory viewer.
 *
 * Plain JavaScript, no dependencies. Data comes as script files (file:// pages may not fetch()):
 * index.js sets window.TBV_INDEX (every trial, columnar); trials/<key>.js calls tbvTrial(key, data)
 * and is loaded on demand by inserting a <script> tag. Every view lives in the URL hash:
 *   #/?setting=a,b&task=t&ending=pass&passed=1&sort=tokens&dir=desc&page=2   the index
 *   #/trial/<key>?attempt=3                                                   one trial
 *   #/compare/<keyA>/<keyB>?aa=<attempt>&ab=<attempt>                        two trials side by side
 * Text from the run is always inserted as text (textContent), never as HTML.
 */
(function () {
  "use strict";

  var IDX = window.TBV_INDEX;
  var app = document.getElementById("app");
  // when the page's scripts (index.js, this file) were loaded and began to run
  app.setAttribute("data-start-ms", performance.now().toFixed(1));
  var PER_PAGE = 100;

  // ---- DOM -------------------------------------------------------------------------------------
  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        var v = attrs[k];
        if (v === null || v === undefined || v === false) continue;
        if (k === "class") el.className = v;
        else if (k === "text") el.textContent = v;
        else if (k.slice(0, 2) === "on" && typeof v === "function") el.addEventListener(k.slice(2), v);
        else if (k === "open" || k === "selected" || k === "hidden") { if (v) el[k] = true; }
        else el.setAttribute(k, v === true ? "" : String(v));
      }
    }
    for (var i = 2; i < arguments.length; i++) add(el, arguments[i]);
    return el;
  }
  function add(el, kid) {
    if (kid === null || kid === undefined || kid === false) return;
    if (Array.isArray(kid)) { for (var i = 0; i < kid.length; i++) add(el, kid[i]); return; }
    el.appendChild(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); }

  // ---- formatting ------------------------------------------------------------------------------
  function isNum(v) { return typeof v === "number" && isFinite(v); }
  function fmtInt(v) { return isNum(v) ? Math.round(v).toLocaleString("en-US") : "-"; }
  function fmtNum(v, d) {
    if (!isNum(v)) return "-";
    if (d === undefined) d = Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : 3;
    return Number(v.toFixed(d)).toString();
  }
  function fmtSec(v) {
    if (!isNum(v)) return "-";
    if (v < 60) return v.toFixed(v < 10 ? 2 : 1) + " s";
    if (v < 3600) return Math.floor(v / 60) + " m " + Math.round(v % 60) + " s";
    return Math.floor(v / 3600) + " h " + Math.round((v % 3600) / 60) + " m";
  }
  function fmtCost(v) { return isNum(v) ? "$" + (v >= 1 ? v.toFixed(2) : v.toFixed(4)) : "-"; }
  function fmtPct(v) { return isNum(v) ? (100 * v).toFixed(1) + "%" : "-"; }
  function plural(n, word) { return fmtInt(n) + " " + word + (n === 1 ? "" : "s"); }
  function stem(key) { return String(key).replace(/[^A-Za-z0-9_-]/g, "_") || "_"; }
  function fmtParams(p) {
    if (!p || typeof p !== "object") return "";
    return Object.keys(p).map(function (k) {
      var v = p[k];
      return k + "=" + (v !== null && typeof v === "object" ? JSON.stringify(v) : String(v));
    }).join(", ");
  }
  function json(v) { try { return JSON.stringify(v, null, 2); } catch (e) { return String(v); } }

  function endingBadge(ending) {
    var e = ending || "unknown";
    return h("span", {"class": "badge end-" + e.replace(/[^a-z_]/g, ""), text: e.replace(/_/g, " ")});
  }
  function passBadge(passed) {
    return passed ? h("span", {"class": "badge end-pass", text: "passed"})
                  : h("span", {"class": "badge end-fail", text: "failed"});
  }

  // Folded long text: the head and tail stay visible, the middle opens on demand.
  function headTail(text, opts) {
    opts = opts || {};
    var maxLines = opts.lines || 12, maxChars = opts.chars || 2400, cls = opts.cls || "out";
    var box = h("div", {"class": "headtail"});
    if (text === null || text === undefined) return box;
    text = String(text);
    if (opts.cutAt && opts.cut) {
      text = text.slice(0, opts.cutAt) + "\n[... " + fmtInt(opts.cut) +
        " characters not included in the viewer; the whole text is in the trajectory file ...]\n" + text.slice(opts.cutAt);
    }
    if (text === "") { box.appendChild(h("pre", {"class": cls + " empty", text: "(empty)"})); return box; }
    var lines = text.split("\n");
    if (lines.length > 2 * maxLines + 4) {
      var head = lines.slice(0, maxLines).join("\n"), tail = lines.slice(lines.length - maxLines).join("\n");
      var mid = lines.slice(maxLines, lines.length - maxLines).join("\n");
      add(box, [h("pre", {"class": cls + " head", text: head}),
                h("details", {"class": "middle"}, h("summary", {text: plural(lines.length - 2 * maxLines, "more line")}),
                  h("pre", {"class": cls, text: mid})),
                h("pre", {"class": cls + " tail", text: tail})]);
    } else if (text.length > 2 * maxChars + 200) {
      add(box, [h("pre", {"class": cls + " head", text: text.slice(0, maxChars)}),
                h("details", {"class": "middle"}, h("summary", {text: plural(text.length - 2 * maxChars, "more character")}),
                  h("pre", {"class": cls, text: text.slice(maxChars, text.length - maxChars)})),
                h("pre", {"class": cls + " tail", text: text.slice(text.length - maxChars)})]);
    } else {
      box.appendChild(h("pre", {"class": cls, text: text}));
    }
    return box;
  }

  function kv(pairs) {
    var dl = h("dl", {"class": "kv"});
    pairs.forEach(function (p) {
      if (p[1] === null || p[1] === undefined || p[1] === "") return;
      add(dl, [h("dt", {text: p[0]}), h("dd", null, p[1])]);
    });
    return dl;
  }

  function rawDetails(title, obj) {
    return h("details", {"class": "raw"}, h("summary", {text: title}), h("pre", {"class": "json", text: json(obj)}));
  }

  // ---- the URL hash ------------------------------------------------------------------------------
  function parseHash() {
    var s = location.hash.replace(/^#/, "");
    if (s.charAt(0) !== "/") s = "/" + s;
    var qi = s.indexOf("?");
    var pathStr = qi >= 0 ? s.slice(0, qi) : s, qs = qi >= 0 ? s.slice(qi + 1) : "";
    var path = pathStr.split("/").filter(Boolean).map(function (p) {
      try { return decodeURIComponent(p); } catch (e) { return p; }
    });
    var q = {};
    qs.split("&").forEach(function (part) {
      if (!part) return;
      var eq = part.indexOf("=");
      var k = eq < 0 ? part : part.slice(0, eq), v = eq < 0 ? "" : part.slice(eq + 1);
      try { q[decodeURIComponent(k)] = decodeURIComponent(v.replace(/\+/g, " ")); } catch (e) { q[k] = v; }
    });
    return {path: path, q: q};
  }
  function hashFor(path, q) {
    var s = "#/" + path.map(encodeURIComponent).join("/");
    var parts = [];
    Object.keys(q || {}).forEach(function (k) {
      var v = q[k];
      if (v === "" || v === null || v === undefined) return;
      parts.push(encodeURIComponent(k) + "=" + encodeURIComponent(String(v)).replace(/%2C/g, ","));
    });
    return s + (parts.length ? "?" + parts.join("&") : "");
  }
  function trialHash(key, q) { return hashFor(["trial", key], q); }
  function go(hash) { if (location.hash !== hash) location.hash = hash; else route(); }

  // ---- the index (columnar) ----------------------------------------------------------------------
  var C = IDX ? IDX.cols : null;
  var N = C ? C.key.length : 0;
  var keyRow = null, pairRows = null, taskRank = null;

  function rowOf(key) {
    if (!keyRow) { keyRow = {}; for (var i = 0; i < N; i++) keyRow[C.key[i]] = i; }
    return keyRow.hasOwnProperty(key) ? keyRow[key] : -1;
  }
  // Trials on the same task and trial index (the same seed): what compare pairs.
  function pairsOf(r) {
    if (!pairRows) {
      pairRows = {};
      for (var i = 0; i < N; i++) {
        var pk = C.t[i] + "|" + C.i[i];
        (pairRows[pk] = pairRows[pk] || []).push(i);
      }
    }
    return pairRows[C.t[r] + "|" + C.i[r]] || [];
  }
  function settingName(r) { return IDX.settings[C.s[r]]; }
  function taskName(r) { return IDX.tasks[C.t[r]]; }
  function endingName(r) { return C.e[r] === null ? null : IDX.endings[C.e[r]]; }

  var SORTS = {
    "default": null,
    task: function (r) { return taskRank[C.t[r]]; },
    setting: function (r) { return C.s[r]; },
    trial: function (r) { return C.i[r]; },
    reward: function (r) { return C.r[r]; },
    turns: function (r) { return C.tu[r]; },
    tokens: function (r) { return C.tok[r]; },
    cost: function (r) { return C.c[r]; },
    wall: function (r) { return C.w[r]; },
    attempts: function (r) { return C.na[r]; }
  };

  function listParam(v) { return v ? v.split(",").filter(Boolean) : []; }

  function filterRows(q) {
    var settings = listParam(q.setting), tasks = listParam(q.task), endings = listParam(q.ending);
    var sSet = settings.length ? {} : null, tSet = tasks.length ? {} : null, eSet = endings.length ? {} : null;
    settings.forEach(function (s) { var i = IDX.settings.indexOf(s); if (i >= 0) sSet[i] = 1; });
    tasks.forEach(function (t) { var i = IDX.tasks.indexOf(t); if (i >= 0) tSet[i] = 1; });
    endings.forEach(function (e) { var i = IDX.endings.indexOf(e); if (i >= 0) eSet[i] = 1; });
    var passed = q.passed === "1" || q.passed === "true" ? 1 : q.passed === "0" || q.passed === "false" ? 0 : null;
    var rmin = q.rmin !== undefined && q.rmin !== "" ? parseFloat(q.rmin) : null;
    var rmax = q.rmax !== undefined && q.rmax !== "" ? parseFloat(q.rmax) : null;
    var onlyErr = q.error === "1";
    var search = (q.q || "").toLowerCase();
    var out = [];
    for (var r = 0; r < N; r++) {
      if (sSet && !sSet[C.s[r]]) continue;
      if (tSet && !tSet[C.t[r]]) continue;
      if (eSet && !eSet[C.e[r]]) continue;
      if (passed !== null && C.p[r] !== passed) continue;
      if (rmin !== null && !(C.r[r] !== null && C.r[r] >= rmin)) continue;
      if (rmax !== null && !(C.r[r] !== null && C.r[r] <= rmax)) continue;
      if (onlyErr && C.err[r] === null) continue;
      if (search && (taskName(r) + " " + settingName(r) + " " + C.key[r]).toLowerCase().indexOf(search) < 0) continue;
      out.push(r);
    }
    if (!taskRank) {
      taskRank = new Array(IDX.tasks.length);
      IDX.tasks.map(function (t, i) { return [t, i]; }).sort(function (a, b) { return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0; })
        .forEach(function (p, rank) { taskRank[p[1]] = rank; });
    }
    var by = SORTS[q.sort] || null, desc = q.dir === "desc";
    out.sort(function (a, b) {
      if (by) {
        var va = by(a), vb = by(b);
        var na = va === null || va === undefined, nb = vb === null || vb === undefined;
        if (na !== nb) return na ? 1 : -1;  // missing values last, either direction
        if (!na && va !== vb) return (va < vb ? -1 : 1) * (desc ? -1 : 1);
      }
      return (taskRank[C.t[a]] - taskRank[C.t[b]]) || (C.s[a] - C.s[b]) || ((C.i[a] || 0) - (C.i[b] || 0)) || (a - b);
    });
    return out;
  }

  function viewIndex(q) {
    var rows = filterRows(q);
    var per = Math.max(10, parseInt(q.per, 10) || PER_PAGE);
    var pages = Math.max(1, Math.ceil(rows.length / per));
    var page = Math.min(pages, Math.max(1, parseInt(q.page, 10) || 1));
    function setQ(changes) {
      var nq = {};
      Object.keys(q).forEach(function (k) { nq[k] = q[k]; });
      Object.keys(changes).forEach(function (k) { nq[k] = changes[k]; });
      if (!("page" in changes)) delete nq.page;
      go(hashFor([], nq));
    }
    var root = h("div", {"class": "index"});

    // filters
    function select(name, label, values, counts) {
      var cur = listParam(q[name]);
      var sel = h("select", {name: name, id: "f-" + name, onchange: function () { var o = {}; o[name] = this.value; setQ(o); }},
        h("option", {value: "", text: "all " + label}));
      if (cur.length > 1) sel.appendChild(h("option", {value: cur.join(","), selected: true, text: cur.length + " selected"}));
      values.forEach(function (v, i) {
        if (v === null || v === undefined) return;
        sel.appendChild(h("option", {value: v, selected: cur.length === 1 && cur[0] === String(v),
                                      text: v + (counts ? " (" + fmtInt(counts[i]) + ")" : "")}));
      });
      return h("label", null, label, sel);
    }
    function countBy(col, size) {
      var c = new Array(size).fill(0);
      for (var r = 0; r < N; r++) if (C[col][r] !== null) c[C[col][r]]++;
      return c;
    }
    var sortSel = h("select", {id: "f-sort", onchange: function () { setQ({sort: this.value}); }});
    [["", "task, setting, trial"], ["tokens", "tokens"], ["turns", "turns"], ["cost", "cost"], ["wall", "wall time"],
     ["reward", "reward"], ["attempts", "attempts"], ["setting", "setting"]].forEach(function (o) {
      sortSel.appendChild(h("option", {value: o[0], selected: (q.sort || "") === o[0], text: o[1]}));
    });
    var dirSel = h("select", {id: "f-dir", onchange: function () { setQ({dir: this.value}); }},
      h("option", {value: "", selected: q.dir !== "desc", text: "ascending"}),
      h("option", {value: "desc", selected: q.dir === "desc", text: "descending"}));
    var passSel = h("select", {id: "f-passed", onchange: function () { setQ({passed: this.value}); }},
      h("option", {value: "", text: "passed or not"}),
      h("option", {value: "1", selected: q.passed === "1", text: "passed"}),
      h("option", {value: "0", selected: q.passed === "0", text: "not passed"}));
    function numInput(name, ph) {
      return h("input", {type: "number", step: "any", id: "f-" + name, placeholder: ph, value: q[name] || "",
                         onchange: function () { var o = {}; o[name] = this.value; setQ(o); }});
    }
    var search = h("input", {type: "search", id: "f-q", placeholder: "search task, setting, key", value: q.q || "",
                             onchange: function () { setQ({q: this.value}); }});
    add(root, h("form", {"class": "filters", onsubmit: function (e) { e.preventDefault(); }},
      select("setting", "settings", IDX.settings, countBy("s", IDX.settings.length)),
      select("task", "tasks", IDX.tasks.slice().sort(), null),
      select("ending", "endings", IDX.endings, countBy("e", IDX.endings.length)),
      h("label", null, "outcome", passSel),
      h("label", null, "reward", numInput("rmin", "min"), "\u2013", numInput("rmax", "max")),
      h("label", null, "sort", sortSel, dirSel),
      h("label", null, "find", search),
      h("a", {href: "#/", "class": "reset", text: "clear"})));

    // counts
    var passedN = 0, tokSum = 0, turnSum = 0, turnN = 0;
    var bySetting = {}, byEnding = {};
    rows.forEach(function (r) {
      passedN += C.p[r];
      var s = bySetting[C.s[r]] = bySetting[C.s[r]] || {n: 0, passed: 0, turns: 0, turnN: 0, tok: 0, cost: 0, wall: 0,
                                                        tampered: 0};
      s.n++; s.passed += C.p[r]; s.tampered += (C.tm && C.tm[r]) ? 1 : 0; s.tok += C.tok[r] || 0; s.cost += C.c[r] || 0; s.wall += C.w[r] || 0;
      if (isNum(C.tu[r])) { s.turns += C.tu[r]; s.turnN++; turnSum += C.tu[r]; turnN++; }
      tokSum += C.tok[r] || 0;
      var e = endingName(r) || "unknown";
      byEnding[e] = (byEnding[e] || 0) + 1;
    });
    add(root, h("p", {"class": "counts", id: "count", "data-n": rows.length, "data-total": N},
      h("strong", {text: fmtInt(rows.length)}), " of " + plural(N, "trial") + " match \u00b7 " + fmtInt(passedN) + " passed",
      rows.length ? " (" + fmtPct(passedN / rows.length) + ") \u00b7 mean " + fmtNum(turnN ? turnSum / turnN : NaN, 1) +
        " turns, " + fmtInt(tokSum / rows.length) + " tokens" : ""));
    var chips = h("div", {"class": "chips"});
    Object.keys(byEnding).sort().forEach(function (e) {
      chips.appendChild(h("a", {href: hashFor([], Object.assign({}, q, {ending: e, page: ""})), "class": "chip"},
        endingBadge(e), " " + fmtInt(byEnding[e])));
    });
    add(root, chips);
    var st = h("table", {"class": "grid settings-summary"},
      h("thead", null, h("tr", null, ["setting", "policy", "trajectory", "trials", "passed", "pass rate", "tampered", "mean turns",
        "mean tokens", "mean cost", "mean wall"].map(function (c) { return h("th", {text: c}); }))));
    var sb = h("tbody");
    Object.keys(bySetting).map(Number).sort(function (a, b) { return a - b; }).forEach(function (si) {
      var s = bySetting[si], name = IDX.settings[si], info = IDX.setting_info[name] || {};
      sb.appendChild(h("tr", null,
        h("td", null, h("a", {href: hashFor([], Object.assign({}, q, {setting: name, page: ""})), text: name})),
        h("td", {text: (info.policy || "-") + (info.n > 1 ? " N=" + info.n : "")}),
        h("td", {text: info.trajectory || "single"}),
        h("td", {"class": "num", text: fmtInt(s.n)}), h("td", {"class": "num", text: fmtInt(s.passed)}),
        h("td", {"class": "num", text: fmtPct(s.passed / s.n)}),
        h("td", {"class": "num tampered-count" + (s.tampered ? " bad" : ""), title: "trials whose agent changed what " +
          "the verifier depends on or tried to forge its verdict (counted as failures)", text: fmtInt(s.tampered)}),
        h("td", {"class": "num", text: fmtNum(s.turnN ? s.turns / s.turnN : NaN, 1)}),
        h("td", {"class": "num", text: fmtInt(s.tok / s.n)}), h("td", {"class": "num", text: fmtCost(s.cost / s.n)}),
        h("td", {"class": "num", text: fmtSec(s.wall / s.n)})));
    });
    st.appendChild(sb);
    add(root, h("div", {"class": "tw"}, st));

    // the table
    function th(label, sortKey) {
      if (!sortKey) return h("th", {text: label});
      var active = q.sort === sortKey;
      var dir = active && q.dir !== "desc" ? "desc" : "";
      return h("th", {"class": "sortable" + (active ? " active" : "")},
        h("a", {href: hashFor([], Object.assign({}, q, {sort: sortKey, dir: dir, page: ""})),
                text: label + (active ? (q.dir === "desc" ? " \u25bc" : " \u25b2") : "")}));
    }
    var table = h("table", {"class": "grid trials", id: "trials"},
      h("thead", null, h("tr", null, th("task", "task"), th("setting", "setting"), th("trial", "trial"), th("ending"),
        th("reward", "reward"), th("turns", "turns"), th("tokens", "tokens"), th("cost", "cost"), th("wall", "wall"),
        th("attempts", "attempts"), th("error"))));
    var tb = h("tbody");
    rows.slice((page - 1) * per, page * per).forEach(function (r) {
      var key = C.key[r];
      tb.appendChild(h("tr", {"class": "trial-row", "data-key": key},
        h("td", null, h("a", {href: trialHash(key), "class": "trial-link", text: taskName(r)})),
        h("td", {text: settingName(r)}), h("td", {"class": "num", text: C.i[r]}),
        h("td", null, endingBadge(endingName(r))),
        h("td", {"class": "num", text: fmtNum(C.r[r])}), h("td", {"class": "num", text: fmtInt(C.tu[r])}),
        h("td", {"class": "num", text: fmtInt(C.tok[r])}), h("td", {"class": "num", text: fmtCost(C.c[r])}),
        h("td", {"class": "num", text: fmtSec(C.w[r])}), h("td", {"class": "num", text: C.na[r]}),
        h("td", {"class": "err", text: C.err[r] === null ? "" : IDX.errors[C.err[r]]})));
    });
    table.appendChild(tb);
    add(root, h("div", {"class": "tw full"}, table));
    if (pages > 1) {
      var pager = h("nav", {"class": "pager"});
      function pageLink(p, label) {
        return p === page || p < 1 || p > pages ? h("span", {"class": "cur", text: label})
          : h("a", {href: hashFor([], Object.assign({}, q, {page: p === 1 ? "" : p})), text: label});
      }
      add(pager, [pageLink(page - 1, "\u2190 previous"), " page " + page + " of " + pages + " ", pageLink(page + 1, "next \u2192")]);
      add(root, pager);
    }
    return root;
  }

  // ---- trial data --------------------------------------------------------------------------------
  var trials = {}, waiting = {};
  window.tbvTrial = function (key, data) {
    trials[key] = data;
    (waiting[key] || []).forEach(function (w) { w.resolve(data); });
    delete waiting[key];
  };
  function loadTrial(key) {
    if (trials[key]) return Promise.resolve(trials[key]);
    return new Promise(function (resolve, reject) {
      var first = !waiting[key];
      (waiting[key] = waiting[key] || []).push({resolve: resolve, reject: reject});
      if (!first) return;
      var src = "trials/" + stem(key) + ".js";
      var s = h("script", {src: src, charset: "utf-8"});
      s.onerror = function () {
        (waiting[key] || []).forEach(function (w) {
          w.reject(new Error("no data for this trial (" + src + "); rebuild the viewer with `tbscale view RUN`"));
        });
        delete waiting[key];
        s.remove();
      };
      document.head.appendChild(s);
    });
  }

  // ---- one turn --------------------------------------------------------------------------------
  function visibleThought(text) {
    if (!text) return "";
    return String(text).replace(/```[\s\S]*?(```|$)/g, "").replace(/\n{3,}/g, "\n\n").trim();
  }

  function callChip(c) {
    var u = c.usage || {};
    var parts = [c.role || "?", c.model || ""];
    var txt = (c.n > 1 ? "\u00d7" + c.n + " " : "") + "in " + fmtInt(u.input) + " \u00b7 out " + fmtInt(u.output) +
      (u.reasoning ? " \u00b7 reasoning " + fmtInt(u.reasoning) : "") + (u.cached ? " \u00b7 cached " + fmtInt(u.cached) : "") +
      " \u00b7 " + fmtSec(c.latency_sec) + (c.retries ? " \u00b7 " + plural(c.retries, "retry").replace("retrys", "retries") : "");
    return h("span", {"class": "call role-" + String(c.role || "x").replace(/[^a-z_]/g, "") + (c.error ? " failed" : ""),
                      title: c.error ? "error: " + c.error : ""},
      h("b", {text: parts[0]}), " ", h("span", {"class": "model", text: parts[1]}), " " + txt,
      c.error ? h("span", {"class": "call-err", text: " error: " + c.error}) : null);
  }

  // Per-candidate verifier results of a turn: pointwise scores, pairwise comparisons, listwise pick.
  function verifierByCandidate(turn) {
    var by = {};
    (turn.verifier_calls || []).forEach(function (vc) {
      if (vc.candidate !== undefined && vc.candidate !== null) {
        (by[vc.candidate] = by[vc.candidate] || []).push(vc);
      }
    });
    return by;
  }

  function candidateCard(c, i, ctx) {
    var sel = ctx.selection || {};
    var scores = sel.scores || [];
    var sameAs = sel.same_as || {};
    var tied = (sel.tied || []).indexOf(i) >= 0 && (sel.tied || []).length > 1;
    var picked = i === ctx.pick;
    var badges = [h("span", {"class": "cidx", text: "#" + i})];
    if (picked) badges.push(h("span", {"class": "badge picked-badge", text: ctx.executed ? "executed" : "picked"}));
    if (c.submission) badges.push(h("span", {"class": "badge sub", text: "submits"}));
    if (c.runnable === false) badges.push(h("span", {"class": "badge bad", text: "cannot run"}));
    if (isNum(scores[i])) badges.push(h("span", {"class": "badge score", title: "verifier score", text: "score " + fmtNum(scores[i])}));
    if (sameAs[String(i)] !== undefined) badges.push(h("span", {"class": "badge dim", text: "same as #" + sameAs[String(i)]}));
    if (tied) badges.push(h("span", {"class": "badge dim", text: "tied"}));
    if (c.finish_reason && c.finish_reason !== "stop" && c.finish_reason !== "tool_calls")
      badges.push(h("span", {"class": "badge bad", text: c.finish_reason}));
    var toks = h("span", {"class": "ctoks", text: fmtInt(c.output_tokens) + " tok" +
      (c.reasoning_tokens ? " (" + fmtInt(c.reasoning_tokens) + " reasoning)" : "")});
    var body = [];
    if (c.runnable === false || !c.command) {
      body.push(h("div", {"class": "perr", text: c.parse_error || "no command"}));
    } else {
      body.push(h("pre", {"class": "cmd", text: c.command}));
    }
    var thought = visibleThought(c.text);
    if (thought) body.push(h("details", {"class": "thought"}, h("summary", {text: "thought"}), h("pre", {"class": "prose", text: thought})));
    if (c.reasoning) body.push(h("details", {"class": "reasoning"}, h("summary", {text: "reasoning"}), h("pre", {"class": "prose", text: c.reasoning})));
    if (c.tool_calls && c.tool_calls.length) body.push(rawDetails("tool calls", c.tool_calls));
    var ran = ctx.lookahead && ctx.lookahead.by_candidate ? ctx.lookahead.by_candidate[String(i)] : null;
    if (ran) body.push(forkOutcome(ran));
    else if (ctx.lookahead && c.runnable !== false) body.push(h("div", {"class": "fork-outcome muted", text: "not run (fork budget)"}));
    var vcs = ctx.verifierBy[i] || [];
    if (vcs.length) {
      body.push(h("div", {"class": "cverif"}, vcs.map(function (vc) {
        var p = vc.parsed && typeof vc.parsed === "object" ? vc.parsed : {};
        return h("div", {"class": "vline"}, h("b", {text: (vc.method || "verifier") + (vc.sample !== undefined ? " #" + vc.sample : "") + ": "}),
          vc.error ? h("span", {"class": "call-err", text: vc.error}) : (isNum(p.score) ? "score " + fmtNum(p.score) : ""),
          p.rationale ? h("span", {"class": "vrat", text: " \u2014 " + p.rationale}) : null);
      })));
    }
    return h("div", {"class": "cand" + (picked ? " picked" : "") + (c.runnable === false ? " unrunnable" : ""), "data-index": i},
      h("div", {"class": "chead"}, badges, toks), body);
  }

  // What a lookahead candidate did in its fork, shown beside it (strategies/lookahead.py).
  function forkOutcome(r) {
    var head = h("div", {"class": "ohead"}, h("b", {text: "In its fork"}), " ",
      h("span", {"class": "badge " + (r.exit_code === 0 ? "ok" : "bad"), text: "exit " + (r.exit_code === null || r.exit_code === undefined ? "?" : r.exit_code)}),
      r.timed_out ? h("span", {"class": "badge bad", text: "timed out"}) : null,
      " " + fmtSec(r.duration_sec) + " \u00b7 " + plural(r.output_bytes || 0, "byte"),
      r.shared ? h("span", {"class": "badge dim", text: r.first ? "shared fork" : "same command: shares a fork"}) : null);
    return h("div", {"class": "fork-outcome obs"}, head, headTail(r.output, {cut: r.output_cut, lines: 8, chars: 1200}));
  }

  function selectionBox(turn, pick) {
    var sel = turn.selection;
    if (!sel) return null;
    var who = (sel.method || "selector") + (sel.model ? " (" + sel.model + ")" : "") + (sel.self_verification ? " \u00b7 self-verification" : "");
    var box = h("div", {"class": "selection" + (sel.selector_failed ? " failed" : "")},
      h("div", {"class": "shead"}, h("b", {text: "Pick #" + pick}), " by " + who,
        sel.tries > 1 ? " \u00b7 " + sel.tries + " tries" : "",
        sel.selector_failed ? h("span", {"class": "badge bad", text: "selector failed: fallback"}) : null),
      h("p", {"class": "rationale", text: sel.rationale || ""}));
    var comps = sel.comparisons || [];
    if (comps.length) {
      var t = h("table", {"class": "grid comps"}, h("thead", null, h("tr", null,
        ["pair (A vs B)", "margin", "better", "verifier"].map(function (c) { return h("th", {text: c}); }))));
      var pairCalls = {};
      (turn.verifier_calls || []).forEach(function (vc) { if (vc.pair) pairCalls[vc.pair.join(",")] = vc; });
      var tb = h("tbody");
      comps.forEach(function (cm) {
        var vc = pairCalls[cm[0] + "," + cm[1]], p = vc && vc.parsed && typeof vc.parsed === "object" ? vc.parsed : {};
        var better = cm[2] > 0 ? "#" + cm[0] : cm[2] < 0 ? "#" + cm[1] : "tie";
        tb.appendChild(h("tr", null, h("td", {text: "#" + cm[0] + " vs #" + cm[1]}), h("td", {"class": "num", text: fmtNum(cm[2], 3)}),
          h("td", {text: better}),
          h("td", {text: (isNum(p.score_a) ? "A " + fmtNum(p.score_a) + " / B " + fmtNum(p.score_b) + " " : "") +
            (p.preference ? "prefers " + p.preference + " " : "") + (p.rationale ? "\u2014 " + p.rationale : "")})));
      });
      t.appendChild(tb);
      add(box, [h("div", {"class": "sub-h", text: "Pairwise comparisons" + (sel.pairs_asked ? " (" + sel.pairs_asked + " asked)" : "")}),
                h("div", {"class": "tw"}, t)]);
    }
    var lw = (turn.verifier_calls || []).filter(function (vc) { return vc.method === "listwise"; });
    lw.forEach(function (vc) {
      var p = vc.parsed && typeof vc.parsed === "object" ? vc.parsed : {};
      if (vc.shown && isNum(p.selected_index))
        add(box, h("p", {"class": "vline", text: "listwise verifier saw " + vc.shown.map(function (x) { return "#" + x; }).join(", ") +
          " and picked #" + vc.shown[p.selected_index] + (p.rationale ? " \u2014 " + p.rationale : "")}));
    });
    if (turn.verifier_calls && turn.verifier_calls.length) add(box, verifierCallsDetails(turn.verifier_calls, "verifier calls"));
    var extra = {};
    ["judged", "same_as", "tied", "samples"].forEach(function (k) { if (sel[k] !== undefined) extra[k] = sel[k]; });
    if (Object.keys(extra).length) add(box, rawDetails("selection details", extra));
    return box;
  }

  function verifierCallsDetails(calls, title) {
    return h("details", {"class": "vcalls"}, h("summary", {text: plural(calls.length, "call").replace(/call/, title.replace(/s$/, "")) }),
      calls.map(function (vc) {
        var label = [vc.role, vc.method, vc.candidate !== undefined ? "candidate #" + vc.candidate : null,
          vc.pair ? "pair #" + vc.pair.join(" vs #") : null, vc.round !== undefined ? "round " + vc.round : null,
          vc.group !== undefined ? "group " + vc.group : null, vc.vote !== undefined ? "vote " + vc.vote : null,
          vc.of_attempt !== undefined ? "of attempt " + vc.of_attempt : null].filter(function (x) { return x !== null && x !== undefined; }).join(" \u00b7 ");
        var parts = [h("div", {"class": "vc-h", text: label + (vc.model ? " \u2014 " + vc.model : "") + (vc.calls > 1 ? " (" + vc.calls + " calls)" : "")})];
        if (vc.error) parts.push(h("div", {"class": "call-err", text: "error: " + vc.error}));
        if (vc.response !== undefined && vc.response !== null) parts.push(h("pre", {"class": "prose", text: String(vc.response) +
          (vc.response_cut ? "\n[... " + fmtInt(vc.response_cut) + " more characters in the trajectory file]" : "")}));
        else if (vc.parsed !== undefined) parts.push(h("pre", {"class": "json", text: json(vc.parsed)}));
        if (vc.prompt) parts.push(h("details", {"class": "prompt"},
          h("summary", {text: "prompt: " + plural(vc.prompt.messages, "message") + ", " + fmtInt(vc.prompt.chars) + " characters (end of the last one)"}),
          h("pre", {"class": "prose", text: (vc.prompt.last_cut ? "[... " + fmtInt(vc.prompt.last_cut) + " characters before]\n" : "") + vc.prompt.last_tail})));
        return h("div", {"class": "vc"}, parts);
      }));
  }

  function observationBox(obs, clipHead) {
    if (!obs) return null;
    var head = h("div", {"class": "ohead"}, h("b", {text: "Observation"}), " ",
      h("span", {"class": "badge " + (obs.exit_code === 0 ? "ok" : "bad"), text: "exit " + (obs.exit_code === null || obs.exit_code === undefined ? "?" : obs.exit_code)}),
      obs.timed_out ? h("span", {"class": "badge bad", text: "timed out"}) : null,
      " " + fmtSec(obs.duration_sec) + " \u00b7 " + plural((obs.output || "").length, "character"));
    return h("div", {"class": "obs"}, head, headTail(obs.output, {cut: obs.output_cut, cutAt: clipHead}));
  }

  function renderTurn(turn, attempt, data) {
    var cands = turn.candidates || [];
    var sel = turn.selection;
    var pick = sel && isNum(sel.index) ? sel.index : turn.action && isNum(turn.action.selected_index) ? turn.action.selected_index : null;
    var box = h("section", {"class": "turn", "data-turn": turn.turn, "data-attempt": attempt.index, id: "a" + attempt.index + "-t" + turn.turn});
    var head = h("div", {"class": "thead"}, h("span", {"class": "tnum", text: "Turn " + turn.turn}),
      cands.length > 1 ? h("span", {"class": "muted", text: " " + cands.length + " candidates"}) : null);
    add(box, head);
    if (turn.calls.length) add(box, h("div", {"class": "calls"}, turn.calls.map(callChip)));
    if (cands.length > 1) {
      var ctx = {selection: sel, pick: pick, executed: !!turn.action, verifierBy: verifierByCandidate(turn),
                 lookahead: turn.lookahead};
      var grid = h("div", {"class": "cands", style: "grid-template-columns: repeat(" + cands.length + ", minmax(240px, 1fr))"});
      cands.forEach(function (c, i) { grid.appendChild(candidateCard(c, i, ctx)); });
      add(box, h("div", {"class": "cands-scroll"}, grid));
      add(box, selectionBox(turn, pick));
    } else if (cands.length === 1) {
      var c = cands[0], thought = visibleThought(c.text);
      add(box, h("div", {"class": "single"},
        h("span", {"class": "ctoks", text: fmtInt(c.output_tokens) + " output tokens" + (c.reasoning_tokens ? " (" + fmtInt(c.reasoning_tokens) + " reasoning)" : "")}),
        thought ? h("details", {"class": "thought"}, h("summary", {text: "thought"}), h("pre", {"class": "prose", text: thought})) : null,
        c.reasoning ? h("details", {"class": "reasoning"}, h("summary", {text: "reasoning"}), h("pre", {"class": "prose", text: c.reasoning})) : null,
        c.tool_calls && c.tool_calls.length ? rawDetails("tool calls", c.tool_calls) : null,
        !turn.action && c.command ? h("pre", {"class": "cmd", text: c.command}) : null));
      if (sel) add(box, selectionBox(turn, pick));
    } else if (sel) {
      add(box, selectionBox(turn, pick));
    }
    if (turn.format_error) {
      add(box, h("div", {"class": "ferr"}, h("b", {text: "Format error"}), " (" + (turn.format_error.count || "?") + " so far): ",
        h("span", {text: turn.format_error.error || ""})));
      if (cands.length <= 1 && cands[0] && cands[0].text) add(box, h("details", {"class": "thought"}, h("summary", {text: "response"}), h("pre", {"class": "prose", text: cands[0].text})));
    }
    if (turn.action) {
      add(box, h("div", {"class": "action"}, h("div", {"class": "ahead"}, h("b", {text: "Action"}),
          pick !== null && cands.length > 1 ? " (candidate #" + pick + ")" : ""),
        h("pre", {"class": "cmd", text: turn.action.command || ""})));
    }
    add(box, observationBox(turn.observation, data.clip_head));
    (turn.other || []).forEach(function (o) { add(box, rawDetails(o.type + " event", o)); });
    return box;
  }

  // ---- one attempt -----------------------------------------------------------------------------
  function attemptLabel(a) { return "Attempt " + a.index + (a.stage ? " \u00b7 " + a.stage : ""); }

  function attemptOutcome(a) {
    var end = a.end || {}, info = a.info || {};
    return {ending: end.ending || info.ending, reward: end.reward !== undefined ? end.reward : info.reward,
            turns: end.turns !== undefined ? end.turns : info.turns, stop: end.stop_reason || info.stop_reason};
  }

  function summaryOf(data, index) {
    var s = (data.strategy.summaries || []).filter(function (x) { return x.of_attempt === index; });
    return s.length ? s[s.length - 1] : null;
  }

  function renderAttempt(a, data, opts) {
    var o = attemptOutcome(a);
    var isFinal = data.row.final_attempt === a.index || (data.end && data.end.final_attempt === a.index);
    var det = h("details", {"class": "attempt" + (isFinal ? " final" : ""), "data-attempt": a.index, id: "attempt-" + a.index, open: opts.open},
      h("summary", null, h("span", {"class": "alabel", text: attemptLabel(a)}), " ", endingBadge(o.ending),
        " reward " + fmtNum(o.reward) + " \u00b7 " + plural(o.turns || 0, "turn") + (o.stop ? " \u00b7 " + o.stop : ""),
        isFinal && data.attempts.length > 1 ? h("span", {"class": "badge picked-badge", text: "returned"}) : null));
    var body = h("div", {"class": "abody"});
    var start = a.start || {};
    if ((start.context_attempts || []).length) {
      add(body, h("p", {"class": "ctx"}, "Refines the summaries of attempts ",
        start.context_attempts.map(function (i, k) {
          return [k ? ", " : "", h("a", {href: trialHash(data.key, {attempt: i}), text: String(i)})];
        })));
    }
    if (start.prefix_of !== undefined && start.prefix_of !== null)
      add(body, h("p", {"class": "ctx", text: "Continues the first " + start.prefix_turns + " turns of attempt " + start.prefix_of + " (replayed)"}));
    if (a.replay.length) add(body, rawDetails("replayed commands (" + a.replay.length + ")", a.replay));
    if (start.container || start.image) add(body, h("p", {"class": "muted small", text: "image " + (start.image || "?") +
      (start.image_built ? " (built)" : "") + " \u00b7 container " + (start.container || "?")}));
    if (!opts.lazy) {
      a.turns.forEach(function (t) { add(body, renderTurn(t, a, data)); });
      if (!a.turns.length) add(body, h("p", {"class": "muted", text: "No turns logged."}));
    }
    (a.other || []).forEach(function (ev) { add(body, rawDetails(ev.type + " event", ev)); });
    if (a.verifier) {
      var v = a.verifier;
      add(body, h("div", {"class": "verifier"}, h("div", {"class": "vhead"}, h("b", {text: "Verifier"}), " ",
          passBadge(v.passed), " reward " + fmtNum(v.reward), v.error ? h("span", {"class": "call-err", text: " " + v.error}) : null),
        headTail(v.output, {cut: v.output_cut, cutAt: data.clip_head}),
        v.details ? rawDetails("details", v.details) : null));
    }
    if (a.end) {
      var e = a.end;
      add(body, h("div", {"class": "aend"}, h("b", {text: "Ending: "}), endingBadge(e.ending), " stop reason ",
        h("code", {text: e.stop_reason || "-"}), e.error ? h("span", {"class": "call-err", text: " " + e.error}) : null,
        e.timing ? h("span", {"class": "muted", text: " \u00b7 " + Object.keys(e.timing).map(function (k) { return k + " " + fmtSec(e.timing[k]); }).join(", ")}) : null,
        e.usage ? usageTable(e.usage) : null));
    }
    var sum = summaryOf(data, a.index);
    if (sum) add(body, h("details", {"class": "summary-ev"}, h("summary", {text: "Rollout summary (" + (sum.source || "?") + ")" + (sum.error ? ": " + sum.error : "")}),
      h("pre", {"class": "prose", text: sum.text || json(sum.fields)})));
    det.appendChild(body);
    if (opts.lazy) {
      // Long trials: an attempt's turns are drawn the first time it is opened.
      var drawn = false;
      det.addEventListener("toggle", function () {
        if (!det.open || drawn) return;
        drawn = true;
        var anchor = body.querySelector(".verifier, .aend, .summary-ev");
        a.turns.forEach(function (t) { body.insertBefore(renderTurn(t, a, data), anchor); });
      });
    }
    return det;
  }

  function usageTable(usage) {
    var roles = Object.keys(usage || {});
    if (!roles.length) return null;
    var t = h("table", {"class": "grid usage"}, h("thead", null, h("tr", null,
      ["role", "calls", "input", "output", "reasoning", "cached", "cost"].map(function (c) { return h("th", {text: c}); }))));
    var tb = h("tbody");
    roles.forEach(function (r) {
      var u = usage[r] || {};
      tb.appendChild(h("tr", null, h("td", {text: r}), h("td", {"class": "num", text: fmtInt(u.calls)}),
        h("td", {"class": "num", text: fmtInt(u.input)}), h("td", {"class": "num", text: fmtInt(u.output)}),
        h("td", {"class": "num", text: fmtInt(u.reasoning)}), h("td", {"class": "num", text: fmtInt(u.cached)}),
        h("td", {"class": "num", text: fmtCost(u.cost_usd)})));
    });
    t.appendChild(tb);
    return h("div", {"class": "tw"}, t);
  }

  // ---- RTV brackets --------------------------------------------------------------------------------
  function attemptTag(data, m) {
    var a = null;
    for (var i = 0; i < data.attempts.length; i++) if (data.attempts[i].index === m) a = data.attempts[i];
    var o = a ? attemptOutcome(a) : {};
    return h("a", {href: trialHash(data.key, {attempt: m}), "class": "atag " + (o.ending === "pass" ? "ok" : o.ending ? "no" : ""),
                   title: a ? attemptLabel(a) + " \u00b7 " + (o.ending || "?") + " \u00b7 reward " + fmtNum(o.reward) : ""},
      "attempt " + m, a && a.stage ? h("span", {"class": "astage", text: " " + a.stage}) : null,
      o.ending ? h("span", {"class": "amark", text: o.ending === "pass" ? " \u2713" : " \u2717"}) : null);
  }

  function renderBracket(tour, data) {
    var box = h("div", {"class": "bracket", "data-stage": tour.stage || ""});
    add(box, h("div", {"class": "bhead"}, h("b", {text: (tour.stage || "selection") + ": "}),
      (tour.method || "?") + (tour.group_size ? ", groups of " + tour.group_size : "") +
      (tour.target ? ", keeps " + tour.target : "") + " \u00b7 from attempts " + (tour.from || []).join(", ") +
      " \u2192 " + (tour.selected || []).join(", ")));
    if (tour.source && tour.source !== "strategy_record") add(box, h("p", {"class": "muted small", text: "rebuilt from " + tour.source}));
    var rounds = h("div", {"class": "rounds"});
    (tour.rounds || []).forEach(function (rd) {
      var col = h("div", {"class": "round", "data-round": rd.round}, h("div", {"class": "rhead", text: "Round " + rd.round}));
      (rd.groups || []).forEach(function (g, gi) {
        var members = g.members || [];
        var counts = g.counts || {};
        var winners = g.winners || (g.winner !== undefined && g.winner !== null ? [g.winner] : []);
        var total = (g.votes || []).length || 1;
        var grp = h("div", {"class": "group" + (g.bye ? " bye" : ""), "data-group": gi});
        members.forEach(function (m) {
          var won = winners.indexOf(m) >= 0;
          var n = counts[String(m)] || 0;
          add(grp, h("div", {"class": "member" + (won ? " winner" : ""), "data-attempt": m},
            attemptTag(data, m),
            g.bye ? h("span", {"class": "muted small", text: " bye"}) :
              h("span", {"class": "votes"}, h("span", {"class": "vbar", style: "width:" + Math.round(60 * n / total) + "px"}),
                " " + plural(n, "vote")),
            won ? h("span", {"class": "adv", text: " \u2192"}) : null));
        });
        var notes = [];
        if (g.tie_broken) notes.push("tie broken by a seeded coin");
        if (g.invalid_votes) notes.push(plural(g.invalid_votes, "unusable vote"));
        if (notes.length) add(grp, h("div", {"class": "muted small", text: notes.join(" \u00b7 ")}));
        if ((g.votes || []).length) {
          add(grp, h("details", {"class": "vlist"}, h("summary", {text: "votes"}), g.votes.map(function (v, vi) {
            var resp = v.reply && v.reply.response;
            var rat = resp;
            try { var obj = JSON.parse(resp); if (obj && obj.rationale) rat = obj.rationale; } catch (e) { /* keep the raw reply */ }
            return h("div", {"class": "vote"}, h("b", {text: "vote " + vi + ": "}),
              v.choice === null || v.choice === undefined ? h("span", {"class": "call-err", text: "no usable choice" + (v.error ? " (" + v.error + ")" : "")})
                : "attempt " + v.choice,
              v.order ? h("span", {"class": "muted", text: " (shown " + v.order.join(", ") + ")"}) : null,
              rat ? h("div", {"class": "vrat", text: String(rat)}) : null);
          })));
        }
        col.appendChild(grp);
      });
      rounds.appendChild(col);
    });
    var fin = h("div", {"class": "round final-col"}, h("div", {"class": "rhead", text: "Selected"}));
    (tour.selected || []).forEach(function (m) { fin.appendChild(h("div", {"class": "member winner selected", "data-attempt": m}, attemptTag(data, m))); });
    rounds.appendChild(fin);
    add(box, h("div", {"class": "rounds-scroll"}, rounds));
    return box;
  }

  function strategySection(data) {
    var row = data.row;
    var multi = data.attempts.length > 1 || (data.tournaments || []).length;
    var calls = data.strategy.calls || [];
    if (!multi && !calls.length && !(data.strategy.verifier_calls || []).length) return null;
    var tp = fmtParams(row.trajectory_params);
    var sec = h("section", {"class": "strategy"}, h("h2", null, "Strategy: " + (row.trajectory || "single"),
      tp ? h("span", {"class": "params", text: " \u00b7 " + tp}) : null));
    if (data.attempts.length > 1) {
      var t = h("table", {"class": "grid attempts-table"}, h("thead", null, h("tr", null,
        ["attempt", "stage", "ending", "reward", "turns", "stop reason", "context", "summary"].map(function (c) { return h("th", {text: c}); }))));
      var tb = h("tbody");
      data.attempts.forEach(function (a) {
        var o = attemptOutcome(a), s = summaryOf(data, a.index);
        var isFinal = row.final_attempt === a.index;
        tb.appendChild(h("tr", {"class": isFinal ? "final" : ""}, h("td", null, attemptTag(data, a.index), isFinal ? h("span", {"class": "badge picked-badge", text: "returned"}) : null),
          h("td", {text: a.stage || "-"}), h("td", null, endingBadge(o.ending)), h("td", {"class": "num", text: fmtNum(o.reward)}),
          h("td", {"class": "num", text: fmtInt(o.turns)}), h("td", {text: o.stop || "-"}),
          h("td", {text: ((a.start || {}).context_attempts || (a.info || {}).context || []).join(", ")}),
          h("td", {text: s ? s.source + (s.error ? " (error)" : "") : ""})));
      });
      t.appendChild(tb);
      add(sec, h("div", {"class": "tw"}, t));
    }
    (data.tournaments || []).forEach(function (tour) { add(sec, renderBracket(tour, data)); });
    if (calls.length) {
      var agg = {};
      calls.forEach(function (c) {
        var k = (c.role || "?") + "\u0000" + (c.model || "");
        var a = agg[k] = agg[k] || {role: c.role, model: c.model, calls: 0, input: 0, output: 0, latency: 0, retries: 0, errors: 0};
        var u = c.usage || {};
        a.calls++; a.input += u.input || 0; a.output += u.output || 0; a.latency += c.latency_sec || 0;
        a.retries += c.retries || 0; a.errors += c.error ? 1 : 0;
      });
      var ct = h("table", {"class": "grid"}, h("thead", null, h("tr", null,
        ["role", "model", "calls", "input", "output", "latency (sum)", "retries", "errors"].map(function (c) { return h("th", {text: c}); }))));
      var cb = h("tbody");
      Object.keys(agg).forEach(function (k) {
        var a = agg[k];
        cb.appendChild(h("tr", null, h("td", {text: a.role}), h("td", {text: a.model}), h("td", {"class": "num", text: fmtInt(a.calls)}),
          h("td", {"class": "num", text: fmtInt(a.input)}), h("td", {"class": "num", text: fmtInt(a.output)}),
          h("td", {"class": "num", text: fmtSec(a.latency)}), h("td", {"class": "num", text: fmtInt(a.retries)}),
          h("td", {"class": "num", text: fmtInt(a.errors)})));
      });
      ct.appendChild(cb);
      add(sec, [h("div", {"class": "sub-h", text: "The strategy's own model calls (summaries, judge votes)"}), h("div", {"class": "tw"}, ct)]);
    }
    var sums = data.strategy.summaries || [];
    if (sums.length) {
      add(sec, h("details", {"class": "summaries"}, h("summary", {text: plural(sums.length, "rollout summary").replace("summarys", "summaries")}),
        sums.map(function (s) {
          return h("details", {"class": "summary-ev"}, h("summary", {text: "attempt " + s.of_attempt + (s.stage ? " (" + s.stage + ")" : "") + " \u00b7 " + (s.source || "?") + (s.error ? " \u00b7 " + s.error : "")}),
            h("pre", {"class": "prose", text: s.text || json(s.fields)}));
        })));
    }
    var vcs = (data.strategy.verifier_calls || []);
    if (vcs.length) add(sec, verifierCallsDetails(vcs, "judge and summarizer calls"));
    (data.strategy.other || []).forEach(function (ev) { add(sec, rawDetails(ev.type + " event", ev)); });
    if (row.strategy_record) add(sec, rawDetails("strategy record (trials.jsonl)", row.strategy_record));
    return sec;
  }

  // ---- the trial page ----------------------------------------------------------------------------
  function trialHeader(data, r) {
    var row = data.row;
    var title = h("h1", null, h("span", {"class": "task", text: row.task_id}), h("span", {"class": "sep", text: " \u00b7 "}),
      h("span", {"class": "setting-name", text: row.setting}), h("span", {"class": "sep", text: " \u00b7 trial " + row.trial}));
    var tot = 0;
    Object.keys(row.tokens || {}).forEach(function (k) { tot += (row.tokens[k].input || 0) + (row.tokens[k].output || 0); });
    var status = h("p", {"class": "status"}, endingBadge(row.ending), " ", passBadge(row.passed),
      " reward " + fmtNum(row.reward) + " \u00b7 " + plural(row.turns || 0, "turn") + " \u00b7 stop reason ",
      h("code", {text: row.stop_reason || "-"}), " \u00b7 " + fmtInt(tot) + " tokens \u00b7 " + fmtCost(row.cost_usd) +
      " \u00b7 " + fmtSec((row.timing || {}).trial_wall) + (row.n_attempts > 1 ? " \u00b7 " + plural(row.n_attempts, "attempt") : ""));
    var pp = fmtParams(row.policy_params), tp = fmtParams(row.trajectory_params);
    var meta = kv([["trial key", h("code", {text: row.trial_key})], ["seed", String(row.seed)],
      ["policy", (row.policy || "-") + (pp ? " (" + pp + ")" : row.n > 1 ? " (N=" + row.n + ")" : "")],
      ["trajectory", (row.trajectory || "single") + (tp ? " (" + tp + ")" : "")], ["generator", row.generator_model], ["selector", row.selector_model],
      ["agent", row.agent], ["started", row.started_at], ["finished", row.finished_at],
      ["trajectory file", row.trajectory_path],
      ["error", row.error ? h("span", {"class": "call-err", text: (row.error.type || "") + ": " + (row.error.message || "")}) : null]]);
    var tampering = null;
    if (row.tampering && row.tampering.length) {
      tampering = h("div", {"class": "tampering"}, h("h2", {text: "Tampering (" + row.tampering.length + ")"}),
        h("p", {"class": "muted small", text: "What this attempt did to the verifier or its verdict; a tampered trial is never a pass."}),
        h("ul", null, row.tampering.map(function (t) {
          var by = t.by_command ? " \u00b7 by turn " + t.by_command.turn + ": " + t.by_command.command : "";
          return h("li", null, h("span", {"class": "badge bad", text: t.kind}), " ",
            (t.turn ? "turn " + t.turn + ": " : "") + (t.detail || ""), t.command ? h("code", {text: " " + t.command}) : null,
            by ? h("span", {"class": "muted small", text: by}) : null);
        })));
    }
    return [title, status, meta, tampering, historyBlock(row)];
  }

  // The repositories the agent was asked to fix, when one kept commits made after its HEAD (a fix may
  // be there), and the agent's commands that read past HEAD (docs/swebench.md, "The repository's history").
  function historyBlock(row) {
    var repos = (row.repositories || []).filter(function (x) { return x.after_head || x.left_after_head; });
    var reads = row.history_reads || [];
    if (!repos.length && !reads.length) return null;
    return h("div", {"class": "tampering history"}, h("h2", {text: "Repository history beyond HEAD"}),
      h("p", {"class": "muted small", text: "Commits made after the repository's HEAD that it does not lead to, where a fix may be, and the commands that read past HEAD."}),
      repos.length ? h("ul", null, repos.map(function (x) {
        var left = x.scrubbed ? " \u00b7 scrubbed: " + plural(x.left_after_head, "commit") + " left" : "";
        return h("li", null, h("span", {"class": "badge " + (x.left_after_head ? "bad" : "ok"), text: x.left_after_head ? "exposed" : "scrubbed"}), " ",
          h("code", {text: x.path}), " " + plural(x.after_head, "commit") + " after HEAD (" + x.beyond_head + " beyond it)" + left +
          ((x.refs || []).length ? " \u00b7 refs: " + x.refs.slice(0, 5).join(", ") + (x.refs_beyond_head > 5 ? ", ..." : "") : ""));
      })) : null,
      reads.length ? h("ul", null, reads.map(function (c) {
        return h("li", null, h("span", {"class": "badge bad", text: "reads past HEAD"}), " ", h("code", {text: c}));
      })) : null);
  }

  function compareControl(key, r) {
    if (r < 0) return null;
    var others = pairsOf(r).filter(function (o) { return o !== r; });
    if (!others.length) return h("p", {"class": "muted small", text: "No other setting ran this task with trial index " + C.i[r] + "."});
    var sel = h("select", {id: "compare-with", onchange: function () { if (this.value) go(hashFor(["compare", key, this.value])); }},
      h("option", {value: "", text: "compare with another setting\u2026"}));
    others.forEach(function (o) { sel.appendChild(h("option", {value: C.key[o], text: settingName(o) + " (" + (endingName(o) || "?") + ")"})); });
    return h("div", {"class": "compare-ctl"}, h("label", null, "Same task and seed: ", sel));
  }

  function trialNav(r) {
    if (r < 0) return null;
    var same = [];
    for (var i = 0; i < N; i++) if (C.t[i] === C.t[r] && C.s[i] === C.s[r]) same.push(i);
    same.sort(function (a, b) { return (C.i[a] || 0) - (C.i[b] || 0); });
    if (same.length < 2) return null;
    return h("div", {"class": "trial-nav"}, "Trials of this task and setting: ", same.map(function (i) {
      return i === r ? h("b", {text: String(C.i[i])}) : h("a", {href: trialHash(C.key[i]), text: String(C.i[i])});
    }).reduce(function (acc, x) { if (acc.length) acc.push(" "); acc.push(x); return acc; }, []));
  }

  function viewTrial(key, q) {
    var root = h("div", {"class": "trial"});
    var r = rowOf(key);
    root.appendChild(h("p", {"class": "crumbs"}, h("a", {href: "#/", text: "\u2190 all trials"}),
      r >= 0 ? [" \u00b7 ", h("a", {href: hashFor([], {task: taskName(r)}), text: "this task"}),
                " \u00b7 ", h("a", {href: hashFor([], {setting: settingName(r)}), text: "this setting"})] : null));
    var body = h("div", null, h("p", {"class": "muted", text: "Loading trial " + key + "\u2026"}));
    root.appendChild(body);
    var done = loadTrial(key).then(function (data) {
      clear(body);
      add(body, trialHeader(data, r));
      add(body, h("div", {"class": "navs"}, compareControl(key, r), trialNav(r)));
      add(body, h("details", {"class": "instruction"}, h("summary", {text: "Instruction"}),
        h("pre", {"class": "prose", text: (data.start && data.start.instruction) || "(not in the trajectory)"})));
      if (data.row.tokens) add(body, h("details", {"class": "tokens", open: true}, h("summary", {text: "Tokens per role (every attempt)"}), usageTable(data.row.tokens)));
      add(body, strategySection(data));
      var want = q.attempt !== undefined ? parseInt(q.attempt, 10) : null;
      var finalIdx = data.row.final_attempt !== undefined && data.row.final_attempt !== null ? data.row.final_attempt :
        data.attempts.length ? data.attempts[data.attempts.length - 1].index : null;
      add(body, h("h2", {text: data.attempts.length > 1 ? "Attempts, turn by turn" : "Turn by turn"}));
      var many = data.attempts.length > 1;
      data.attempts.forEach(function (a) {
        var open = want !== null ? a.index === want : a.index === finalIdx || !many;
        add(body, renderAttempt(a, data, {open: open, lazy: !open}));
      });
      if (!data.attempts.length) add(body, h("p", {"class": "muted", text: "The trajectory holds no attempt."}));
      if (data.end) add(body, h("div", {"class": "trial-end"}, h("b", {text: "Trial end: "}), endingBadge(data.end.ending),
        " reward " + fmtNum(data.end.reward) + (data.end.final_attempt !== undefined ? " \u00b7 returned attempt " + data.end.final_attempt : "")));
      if (want !== null) {
        var el = document.getElementById("attempt-" + want);
        if (el) setTimeout(function () { el.scrollIntoView(); }, 0);
      }
    }, function (err) {
      clear(body);
      body.appendChild(h("p", {"class": "error", text: String(err.message || err)}));
    });
    return {el: root, done: done};
  }

  // ---- compare ---------------------------------------------------------------------------------
  function compactTurn(turn) {
    var cands = turn.candidates || [];
    var sel = turn.selection;
    var pick = sel && isNum(sel.index) ? sel.index : turn.action && isNum(turn.action.selected_index) ? turn.action.selected_index : null;
    var box = h("div", {"class": "cturn", "data-turn": turn.turn});
    add(box, h("div", {"class": "thead"}, h("span", {"class": "tnum", text: "Turn " + turn.turn}),
      cands.length > 1 ? h("span", {"class": "muted", text: " pick #" + pick + " of " + cands.length}) : null));
    if (sel && cands.length > 1) add(box, h("p", {"class": "rationale small", text: sel.rationale || ""}));
    if (turn.format_error) add(box, h("div", {"class": "ferr", text: "Format error: " + (turn.format_error.error || "")}));
    if (turn.action) add(box, h("pre", {"class": "cmd", text: turn.action.command || ""}));
    if (turn.observation) add(box, h("div", {"class": "obs"}, h("span", {"class": "badge " + (turn.observation.exit_code === 0 ? "ok" : "bad"),
      text: "exit " + turn.observation.exit_code}), headTail(turn.observation.output, {lines: 5, chars: 600})));
    return box;
  }

  function pickAttempt(data, want) {
    var idx = want !== undefined && want !== "" ? parseInt(want, 10) : data.row.final_attempt;
    for (var i = 0; i < data.attempts.length; i++) if (data.attempts[i].index === idx) return data.attempts[i];
    return data.attempts[data.attempts.length - 1] || null;
  }

  function viewCompare(ka, kb, q) {
    var root = h("div", {"class": "compare"});
    root.appendChild(h("p", {"class": "crumbs"}, h("a", {href: "#/", text: "\u2190 all trials"}), " \u00b7 ",
      h("a", {href: trialHash(ka), text: "trial A"}), " \u00b7 ", h("a", {href: trialHash(kb), text: "trial B"}), " \u00b7 ",
      h("a", {href: hashFor(["compare", kb, ka]), text: "swap"})));
    var body = h("div", null, h("p", {"class": "muted", text: "Loading\u2026"}));
    root.appendChild(body);
    var done = Promise.all([loadTrial(ka), loadTrial(kb)]).then(function (both) {
      clear(body);
      var A = both[0], B = both[1];
      var atA = pickAttempt(A, q.aa), atB = pickAttempt(B, q.ab);
      var ra = rowOf(ka), rb = rowOf(kb);
      if (A.row.task_id !== B.row.task_id || A.row.trial !== B.row.trial)
        add(body, h("p", {"class": "warn", text: "These two trials are not on the same task and trial index: their seeds differ."}));
      else add(body, h("p", {"class": "muted", text: "Task " + A.row.task_id + ", trial " + A.row.trial + ": the same seed (" + A.row.seed + ") for both settings."}));
      function col(D, at, side, r, other) {
        var attSel = null;
        if (D.attempts.length > 1) {
          attSel = h("select", {"class": "att-sel", onchange: function () {
            var nq = Object.assign({}, q); nq[side] = this.value; go(hashFor(["compare", ka, kb], nq)); }});
          D.attempts.forEach(function (a) { attSel.appendChild(h("option", {value: a.index, selected: at && a.index === at.index, text: attemptLabel(a) + (a.index === D.row.final_attempt ? " (returned)" : "")})); });
        }
        var swapSel = null;
        if (r >= 0) {
          var others = pairsOf(r).filter(function (o) { return C.key[o] !== D.key && C.key[o] !== other; });
          if (others.length) {
            swapSel = h("select", {"class": "setting-sel", onchange: function () {
              if (!this.value) return;
              go(side === "aa" ? hashFor(["compare", this.value, kb]) : hashFor(["compare", ka, this.value])); }},
              h("option", {value: "", text: "other setting\u2026"}));
            others.forEach(function (o) { swapSel.appendChild(h("option", {value: C.key[o], text: settingName(o)})); });
          }
        }
        var row = D.row, o = at ? attemptOutcome(at) : {};
        return h("div", {"class": "cmp-col cmp-" + (side === "aa" ? "a" : "b")},
          h("h2", null, h("a", {href: trialHash(D.key), "class": "setting-name", text: row.setting}), " ", swapSel),
          h("p", {"class": "status"}, endingBadge(row.ending), " reward " + fmtNum(row.reward) + " \u00b7 " +
            plural(row.turns || 0, "turn") + " \u00b7 " + (row.policy || "-") + (row.n > 1 ? " N=" + row.n : "") +
            " \u00b7 " + (row.trajectory || "single")),
          attSel ? h("p", null, attSel, " ", endingBadge(o.ending), " " + plural(o.turns || 0, "turn")) : null);
      }
      add(body, h("div", {"class": "cmp-grid cmp-top"}, col(A, atA, "aa", ra, kb), col(B, atB, "ab", rb, ka)));
      var tA = atA ? atA.turns : [], tB = atB ? atB.turns : [];
      var turnNos = {};
      tA.concat(tB).forEach(function (t) { turnNos[t.turn] = 1; });
      var nums = Object.keys(turnNos).map(Number).sort(function (a, b) { return a - b; });
      var grid = h("div", {"class": "cmp-grid cmp-turns"});
      function find(ts, n) { for (var i = 0; i < ts.length; i++) if (ts[i].turn === n) return ts[i]; return null; }
      nums.forEach(function (n) {
        var a = find(tA, n), b = find(tB, n);
        add(grid, [h("div", {"class": "cmp-cell cmp-a"}, a ? compactTurn(a) : h("p", {"class": "muted small", text: "(no turn " + n + ")"})),
                   h("div", {"class": "cmp-cell cmp-b"}, b ? compactTurn(b) : h("p", {"class": "muted small", text: "(no turn " + n + ")"}))]);
      });
      function endCell(at, cls) {
        var v = at && at.verifier;
        return h("div", {"class": "cmp-cell " + cls}, h("b", {text: "Verifier: "}), v ? [passBadge(v.passed), " reward " + fmtNum(v.reward)] : "-",
          at && at.end ? [" \u00b7 ", endingBadge(at.end.ending), " ", h("code", {text: at.end.stop_reason || ""})] : null);
      }
      add(grid, [endCell(atA, "cmp-a"), endCell(atB, "cmp-b")]);
      add(body, grid);
    }, function (err) {
      clear(body);
      body.appendChild(h("p", {"class": "error", text: String(err.message || err)}));
    });
    return {el: root, done: done};
  }

  // ---- routing ------------------------------------------------------------------------------------
  function markReady(view) {
    app.setAttribute("data-view", view);
    app.setAttribute("data-rendered-ms", performance.now().toFixed(1));
    app.setAttribute("data-ready", "1");
  }

  function route() {
    var hs = parseHash(), p = hs.path;
    app.removeAttribute("data-ready");
    clear(app);
    if (!IDX) {
      app.appendChild(h("p", {"class": "error", text: "index.js is missing: build the viewer with `tbscale view RUN`."}));
      return;
    }
    var out, view;
    if (p[0] === "trial" && p[1]) { out = viewTrial(p[1], hs.q); view = "trial"; }
    else if (p[0] === "compare" && p[1] && p[2]) { out = viewCompare(p[1], p[2], hs.q); view = "compare"; }
    else { out = {el: viewIndex(hs.q), done: null}; view = "index"; }
    app.appendChild(out.el);
    document.title = (view === "index" ? "" : view + " \u00b7 ") + IDX.run + " \u00b7 tbscale viewer";
    if (out.done) out.done.then(function () { markReady(view); }, function () { markReady(view); });
    else markReady(view);
    if (view !== "trial" || hs.q.attempt === undefined) window.scrollTo(0, 0);
  }

  function init() {
    if (IDX) {
      document.getElementById("runname").textContent = " \u00b7 " + IDX.run + " \u00b7 " + plural(IDX.trials, "trial");
      if (IDX.simulated) {
        var b = document.getElementById("banner");
        b.textContent = IDX.simulated_banner;
        b.hidden = false;
      }
    }
    window.addEventListener("hashchange", route);
    route();
  }
  init();
})();
