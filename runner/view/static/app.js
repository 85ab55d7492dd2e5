/* ect view: a read-only page over a run store (or `ect static` output).
   Hand-written, no framework, no build step, no network beyond this page's own origin.
   Data comes from the server's JSON API (/api/NAME) or, in a bundle opened from file://,
   from data/NAME.js files that call window.ectData(NAME, object). */
(function () {
  "use strict";
  var MODE = document.body.getAttribute("data-mode") || "server-store";
  var BUNDLE = MODE.indexOf("bundle") === 0;
  var STATIC = MODE.indexOf("static") > 0;
  var main = document.getElementById("main");
  var cache = {};
  var waiting = {};
  var cellsState = { filters: {}, q: "", sort: "seq", dir: 1 };
  var pollTimer = null;

  /* ---------------------------------------------------------------- data */
  window.ectData = function (name, obj) {
    cache[name] = obj;
    (waiting[name] || []).forEach(function (f) { if (obj && obj.error) f[1](new Error(obj.error)); else f[0](obj); });
    delete waiting[name];
  };
  function load(name, fresh) {
    if (!fresh && cache[name] !== undefined) {
      if (cache[name] && cache[name].error) return Promise.reject(new Error(cache[name].error));
      return Promise.resolve(cache[name]);
    }
    if (!BUNDLE) {
      return fetch("api/" + name, { credentials: "same-origin", cache: "no-store" })
        .then(function (r) {
          return r.text().then(function (t) {
            var j;
            // a reply that is not JSON (a proxy's or server's error page) is named, not parsed
            try { j = JSON.parse(t); } catch (e) { throw new Error("HTTP " + r.status + " from the viewer: " + t.split("\n")[0].slice(0, 200)); }
            if (!r.ok) throw new Error(j.error || ("HTTP " + r.status));
            cache[name] = j; return j;
          });
        });
    }
    return new Promise(function (resolve, reject) {
      (waiting[name] = waiting[name] || []).push([resolve, reject]);
      var s = document.createElement("script");
      s.src = "data/" + name + ".js";
      s.onerror = function () {
        (waiting[name] || []).forEach(function (f) { f[1](new Error("not in this bundle: " + name)); });
        delete waiting[name];
      };
      document.head.appendChild(s);
    });
  }

  /* ---------------------------------------------------------------- helpers */
  function esc(v) {
    return String(v === null || v === undefined ? "" : v).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }
  function pre(obj) { return "<pre>" + esc(JSON.stringify(obj, null, 2)) + "</pre>"; }
  function badge(ok, yes, no) {
    return '<span class="badge ' + (ok ? "ok" : "bad") + '">' + esc(ok ? yes : no) + "</span>";
  }
  function setBanner(simulated, line) {
    var b = document.getElementById("banner");
    b.className = simulated ? "sim" : "real";
    b.textContent = line || "";
  }
  function nav(items) {
    document.getElementById("nav").innerHTML = items.map(function (i) {
      return '<a href="' + i[1] + '">' + esc(i[0]) + "</a>";
    }).join("");
  }
  function fail(e) { main.innerHTML = '<p class="error" role="alert">' + esc(e.message || e) + "</p>"; }
  function parseQuery(s) {
    var out = {};
    (s || "").split("&").forEach(function (kv) {
      if (!kv) return;
      var i = kv.indexOf("=");
      out[decodeURIComponent(i < 0 ? kv : kv.slice(0, i))] = i < 0 ? "" : decodeURIComponent(kv.slice(i + 1).replace(/\+/g, " "));
    });
    return out;
  }

  /* ---------------------------------------------------------------- sha256 + RFC 9162 */
  var K = [0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2];
  /* Plain-JS SHA-256, used only where SubtleCrypto is absent (a non-secure remote origin). */
  function sha256js(bytes) {
    var h = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
    var l = bytes.length, n = ((l + 9 + 63) >> 6) << 6, m = new Uint8Array(n);
    m.set(bytes); m[l] = 0x80;
    var bits = l * 8;
    for (var i = 0; i < 8; i++) { m[n - 1 - i] = bits & 0xff; bits = Math.floor(bits / 256); }
    var w = new Array(64);
    for (var off = 0; off < n; off += 64) {
      for (var t = 0; t < 16; t++) w[t] = (m[off + 4 * t] << 24) | (m[off + 4 * t + 1] << 16) | (m[off + 4 * t + 2] << 8) | m[off + 4 * t + 3];
      for (t = 16; t < 64; t++) {
        var a0 = w[t - 15], a1 = w[t - 2];
        var s0 = ((a0 >>> 7) | (a0 << 25)) ^ ((a0 >>> 18) | (a0 << 14)) ^ (a0 >>> 3);
        var s1 = ((a1 >>> 17) | (a1 << 15)) ^ ((a1 >>> 19) | (a1 << 13)) ^ (a1 >>> 10);
        w[t] = (w[t - 16] + s0 + w[t - 7] + s1) | 0;
      }
      var a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
      for (t = 0; t < 64; t++) {
        var S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
        var t1 = (hh + S1 + ((e & f) ^ (~e & g)) + K[t] + w[t]) | 0;
        var S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
        var t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
        hh = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
      }
      h = [h[0] + a, h[1] + b, h[2] + c, h[3] + d, h[4] + e, h[5] + f, h[6] + g, h[7] + hh].map(function (x) { return x | 0; });
    }
    var out = new Uint8Array(32);
    for (i = 0; i < 8; i++) { out[4 * i] = h[i] >>> 24; out[4 * i + 1] = (h[i] >>> 16) & 255; out[4 * i + 2] = (h[i] >>> 8) & 255; out[4 * i + 3] = h[i] & 255; }
    return out;
  }
  var subtle = window.crypto && window.crypto.subtle;
  function sha256(bytes) {
    if (subtle) return subtle.digest("SHA-256", bytes).then(function (d) { return new Uint8Array(d); });
    return Promise.resolve(sha256js(bytes));
  }
  function hex(b) { return Array.prototype.map.call(b, function (x) { return ("0" + x.toString(16)).slice(-2); }).join(""); }
  function unhex(s) { var o = new Uint8Array(s.length / 2); for (var i = 0; i < o.length; i++) o[i] = parseInt(s.substr(2 * i, 2), 16); return o; }
  function cat() {
    var parts = Array.prototype.slice.call(arguments), n = 0, o, k = 0;
    parts.forEach(function (p) { n += p.length; });
    o = new Uint8Array(n);
    parts.forEach(function (p) { o.set(p, k); k += p.length; });
    return o;
  }
  function b64bytes(s) { var bin = atob(s), o = new Uint8Array(bin.length); for (var i = 0; i < bin.length; i++) o[i] = bin.charCodeAt(i); return o; }
  function u64be(n) { var o = new Uint8Array(8); for (var i = 7; i >= 0; i--) { o[i] = n % 256; n = Math.floor(n / 256); } return o; }
  /* RFC 9162 §2.1.3.2: verify an inclusion proof of leaf `leaf` at `index` in a tree of `size`. */
  function verifyInclusion(leaf, index, size, proof, root) {
    if (index >= size) return Promise.resolve(false);
    var fn = index, sn = size - 1, r = leaf, i = 0;
    function step() {
      if (i === proof.length) return Promise.resolve(sn === 0 && hex(r) === hex(root));
      var p = proof[i++];
      if (sn === 0) return Promise.resolve(false);
      var node;
      if ((fn & 1) === 1 || fn === sn) {
        node = cat(new Uint8Array([1]), p, r);
        if ((fn & 1) === 0) { while ((fn & 1) === 0 && fn !== 0) { fn = Math.floor(fn / 2); sn = Math.floor(sn / 2); } }
      } else {
        node = cat(new Uint8Array([1]), r, p);
      }
      fn = Math.floor(fn / 2); sn = Math.floor(sn / 2);
      return sha256(node).then(function (h) { r = h; return step(); });
    }
    return step();
  }
  function checkChain(ch) {
    var body = b64bytes(ch.body_b64);
    var out = {};
    return sha256(cat(new Uint8Array([0]), body)).then(function (leaf) {
      out.leaf = hex(leaf);
      out.leafOk = out.leaf === ch.leaf;
      return sha256(cat(new Uint8Array([2]), unhex(ch.store_id), u64be(ch.seq), unhex(ch.prev_chain), leaf));
    }).then(function (chain) {
      out.chainOk = hex(chain) === ch.chain;
      return verifyInclusion(unhex(ch.leaf), ch.seq, ch.tree_size, ch.proof.map(unhex), unhex(ch.root));
    }).then(function (incl) {
      out.inclusionOk = incl;
      out.signedRootOk = ch.checkpoint_root ? ch.checkpoint_root === ch.root : null;
      try { var b = JSON.parse(new TextDecoder().decode(body)); out.bodyCell = b.cell_id; out.bodyDigest = b.result_digest; } catch (e) { out.bodyCell = null; }
      return out;
    });
  }

  /* ---------------------------------------------------------------- run page */
  function renderRun() {
    return load("run", !BUNDLE).then(function (r) {
      setBanner(r.simulated, r.provider_line);
      var integ = r.integrity || {};
      var cp = r.latest_checkpoint || {};
      var pf = r.preflight;
      var html = "<h1>Run <code>" + esc(r.store) + "</code></h1>";
      html += '<section class="card"><h2>Provider</h2><p class="' + (r.simulated ? "simtext" : "") + '">' + esc(r.provider_line) + "</p>";
      html += "<dl><dt>study</dt><dd>" + esc(r.study) + "</dd><dt>lock digest</dt><dd><code>" + esc(r.lock_digest) + "</code></dd>";
      html += "<dt>preflight digest</dt><dd><code>" + esc(r.preflight_digest) + "</code></dd><dt>store id</dt><dd><code>" + esc(r.store_id) + "</code></dd>";
      html += "<dt>public key</dt><dd><code>" + esc(r.public_key) + "</code></dd><dt>created</dt><dd>" + esc(r.created_utc) + "</dd></dl></section>";
      html += '<section class="card"><h2>Progress and cost</h2><dl><dt>cells committed</dt><dd id="progress">' + esc(r.progress.committed) + " / " + esc(r.progress.total) + "</dd>";
      html += "<dt>estimated cost</dt><dd>$" + esc(r.cost_usd.toFixed(4)) + (r.simulated ? " (simulated provider: price table applied to simulated token counts)" : "") + "</dd>";
      html += "<dt>tokens</dt><dd>" + esc(r.tokens) + "</dd><dt>provider attempts</dt><dd>" + esc(r.provider_attempts) + "</dd>";
      // a count with nothing to count says so, never an empty field
      html += "<dt>stop reasons</dt><dd>" + (Object.keys(r.stop_reasons).map(function (k) { return esc(k) + " " + esc(r.stop_reasons[k]); }).join(", ") || "none (no cell record read)") + "</dd>";
      html += "<dt>outcomes</dt><dd>" + (Object.keys(r.outcomes).map(function (k) { return esc(k) + " " + esc(r.outcomes[k]); }).join(", ") || "none (no cell record read)") + "</dd>";
      var pfail = r.provider_failures || {total: 0};
      html += '<dt>provider failures</dt><dd id="providerfailures">' + (pfail.total ? esc(pfail.total) + " in " + esc(pfail.cells) + " cell(s): " + esc(pfail.by_class.transport) + " transport, " + esc(pfail.by_class.model_output) + " model output (by role: " + Object.keys(pfail.by_role).map(function (k) { return esc(k) + " " + esc(pfail.by_role[k]); }).join(", ") + "; by pipeline: " + Object.keys(pfail.by_pipeline).map(function (k) { return esc(k) + " " + esc(pfail.by_pipeline[k]); }).join(", ") + ")" : "none") + "</dd>";
      var acc = r.accounting;
      if (acc) {
        var kinds = Object.keys(acc.failures_by_kind).map(function (k) { return esc(k) + " " + esc(acc.failures_by_kind[k]); }).join(", ") || "none";
        html += '<dt>every attempt</dt><dd id="accounting">' + esc(acc.attempts) + " attempts, " + esc(acc.retries) + " retries, " + esc(acc.failed_attempts) + " failed (" + kinds + "); " + esc(acc.orphan_attempts) + " of cells not committed; " + esc(acc.halts.length) + " halt(s)</dd>";
        html += '<dt>billed</dt><dd id="billed">$' + esc(acc.billed_usd.toFixed(4)) + " for " + esc(acc.billed_attempts) + " attempt(s) that reached the model" + (acc.estimated_attempts ? ", of which $" + esc(acc.estimated_usd.toFixed(4)) + " estimated for " + esc(acc.estimated_attempts) + " reply(ies) without usage" : "") + (r.simulated ? " (SIMULATED token counts)" : "") + "; committed cells $" + esc(r.cost_usd.toFixed(4)) + "</dd>";
        if (acc.halts.length) html += "<dt>halts</dt><dd><ul>" + acc.halts.map(function (h) { return "<li>" + esc(h.utc) + " at <code>" + esc(h.cell_id) + "</code> (" + esc(h.kind) + "): " + esc(h.reason) + "</li>"; }).join("") + "</ul></dd>";
      }
      html += "</dl></section>";
      // Only facts: a field the verification could not establish says so, never shows empty.
      html += '<section class="card" id="integrity"><h2>Integrity</h2><p id="integrityline">' + (integ.ok ? badge(true, "intact", "") : '<span class="error">' + esc(integ.label || "DAMAGED") + "</span>") + " " + esc(integ.full ? "full" : "quick") + " verification: " + esc(integ.detail) + "</p>";
      html += "<dl><dt>records</dt><dd>" + (r.records_in_store === null ? "SQLite cannot count them" : esc(r.records_in_store) + " in the store") + (integ.ok ? " (" + esc(integ.records) + " verified)" : " (not all verified: " + esc(integ.label || "damage") + ")") + "</dd>";
      html += "<dt>chain head</dt><dd>" + (integ.head ? "<code>" + esc(integ.head.chain) + "</code> (seq " + esc(integ.head.seq) + ")" : "not established (the verification found damage before it could name one)") + "</dd>";
      html += "<dt>signed checkpoint</dt><dd>" + (cp.size !== undefined ? "size " + esc(cp.size) + ", Merkle root <code>" + esc(cp.root) + "</code>, " + esc(cp.created_utc) + (integ.ok ? " (signature checked by the verification above)" : " (not confirmed: the verification above found damage)") : "none in the store") + "</dd></dl>";
      if (BUNDLE) html += '<p class="note">This bundle was written from the store; the verification above ran when it was written.</p>';
      else html += '<p><button id="fullverify" type="button">Run the full verification</button> <span id="fullresult" aria-live="polite"></span></p>';
      html += "</section>";
      html += '<section class="card"><h2>Preflight</h2>';
      if (pf) {
        html += "<p>" + badge(pf.passed, "passed", "FAILED") + " probes: " + esc(pf.probes) + "</p><table><thead><tr><th>check</th><th>ok</th><th>detail</th></tr></thead><tbody>";
        pf.checks.forEach(function (c) { html += "<tr><td>" + esc(c.name) + "</td><td>" + badge(c.ok, "ok", "failed") + "</td><td>" + esc(c.detail) + "</td></tr>"; });
        html += "</tbody></table>";
      } else html += "<p>No preflight report in this store.</p>";
      html += "</section>";
      html += '<section class="card"><h2>Sandbox layers in force</h2>' + (r.sandbox_layers ? pre(r.sandbox_layers) : "<p>Not recorded in this store (stores written before the layers were recorded do not carry them).</p>") + "</section>";
      main.innerHTML = html;
      if (!BUNDLE) {
        pollTimer = setInterval(function () {
          load("run", true).then(function (n) {
            var p = document.getElementById("progress");
            if (p) p.textContent = n.progress.committed + " / " + n.progress.total;
          }).catch(function () {});
        }, 3000);
      }
      var btn = document.getElementById("fullverify");
      if (btn) btn.addEventListener("click", function () {
        var out = document.getElementById("fullresult");
        btn.disabled = true; out.textContent = "verifying…";
        fetch("verify", { method: "POST", credentials: "same-origin" }).then(function (x) { return x.json(); }).then(function (v) {
          out.innerHTML = (v.ok ? badge(true, "intact", "") : '<span class="error">' + esc(v.label || "DAMAGED") + "</span>") + " full verification: " + esc(v.detail);
          btn.disabled = false;
        }).catch(function (e) { out.textContent = String(e); btn.disabled = false; });
      });
    });
  }

  /* ---------------------------------------------------------------- cell table */
  var FILTERS = [["task_id", "task"], ["family", "family"], ["world_id", "world"], ["checkpoint", "checkpoint"], ["policy", "pipeline"],
    ["seed_index", "seed"], ["fault", "fault"], ["outcome", "outcome"], ["stop_reason", "stop reason"]];
  var SHOWN = [["row", "row"], ["task_id", "task"], ["family", "family"], ["world_id", "world"], ["checkpoint", "checkpoint"], ["policy", "pipeline"],
    ["seed_index", "seed"], ["fault", "fault"], ["outcome", "outcome"], ["stop_reason", "stop reason"], ["turns", "turns"], ["tool_calls", "calls"], ["cost_usd", "cost $"], ["provider_failures", "provider failures"]];
  // Every outcome the table can show, with its colour (app.css) and what it means.
  var OUTCOMES = [["supported", "completed, every claim supported"],
    ["premature", "completed at an incomplete checkpoint, unsupported"], ["unsupported", "completed, not every claim supported"],
    ["false_continuation", "a fully supported finish on a clean checkpoint was rejected"], ["stuck", "stopped as stuck while recovery was within budget"],
    ["not_completed", "stopped without completing"], ["unreadable", "the record could not be read (damage)"]];
  /* allow a line break only between word parts (after _ : / and -), never inside a word or number */
  function brk(v) { return esc(v).replace(/([_:\/])/g, "$1<wbr>"); }
  function cellObjects(data) {
    return data.rows.map(function (r) { var o = {}; data.columns.forEach(function (c, i) { o[c] = r[i]; }); return o; });
  }
  function visibleRows(rows) {
    var f = cellsState.filters, q = cellsState.q.toLowerCase();
    var out = rows.filter(function (o) {
      for (var k in f) { if (f[k] !== "" && String(o[k]) !== f[k]) return false; }
      if (q && o.cell_id.toLowerCase().indexOf(q) < 0 && String(o.stop_reason).indexOf(q) < 0 && String(o.outcome).indexOf(q) < 0) return false;
      return true;
    });
    var key = cellsState.sort, dir = cellsState.dir;
    out.sort(function (a, b) {
      var x = a[key], y = b[key];
      if (x === y) return a.seq - b.seq;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * dir;
    });
    return out;
  }
  function cellsHash() {
    var parts = [];
    Object.keys(cellsState.filters).forEach(function (k) { if (cellsState.filters[k] !== "") parts.push(k + "=" + encodeURIComponent(cellsState.filters[k])); });
    if (cellsState.q) parts.push("q=" + encodeURIComponent(cellsState.q));
    if (cellsState.sort !== "seq") parts.push("sort=" + cellsState.sort + "&dir=" + (cellsState.dir > 0 ? "asc" : "desc"));
    return "#/cells" + (parts.length ? "?" + parts.join("&") : "");
  }
  function fillTable(rows) {
    var t0 = performance.now();
    var vis = visibleRows(rows);
    var tb = document.getElementById("cellbody");
    var html = [];
    for (var i = 0; i < vis.length; i++) {
      var o = vis[i];
      var tds = SHOWN.map(function (c) {
        var v = o[c[0]];
        if (c[0] === "cost_usd" && typeof v === "number") v = v.toFixed(5);
        if (c[0] === "outcome") return '<td><span class="oc oc-' + esc(v) + '">' + brk(v) + "</span></td>";
        if (o.damage && c[0] === "row") return '<td class="nw">' + esc(o.seq) + "</td>";
        // a damaged record names its damage where its task would be, never as empty fields
        if (o.damage && c[0] === "task_id") return '<td colspan="7" class="error damage">' + esc(o.damage) + "</td>";
        if (o.damage && ["family", "world_id", "checkpoint", "policy", "seed_index", "fault"].indexOf(c[0]) >= 0) return "";
        return '<td class="' + (typeof v === "number" ? "nw num" : "") + '">' + brk(v) + "</td>";
      }).join("");
      html.push('<tr tabindex="0" data-seq="' + o.seq + '" data-cell="' + esc(o.cell_id) + '">' + tds +
        '<td><a href="#/cell/' + o.seq + '">open</a> · <a href="#/compare/' + o.seq + '">pipelines</a></td></tr>');
    }
    tb.innerHTML = html.join("");
    var damaged = rows.filter(function (o) { return o.damage; });
    var hidden = damaged.filter(function (o) { return vis.indexOf(o) < 0; });
    document.getElementById("count").textContent = vis.length + " of " + rows.length + " records" +
      (damaged.length ? "; " + damaged.length + " could not be read (" + damaged[0].damage.split(":")[0] + (damaged.length > 1 ? ", …" : "") + ")" +
        (hidden.length ? ", " + hidden.length + " of them not shown by this filter (a damaged record has no task, pipeline or outcome to match)" : "") : "");
    document.getElementById("count").className = damaged.length ? "error" : "";
    void tb.offsetHeight; /* force layout so the figure covers building and laying out the rows */
    document.body.setAttribute("data-table-ms", (performance.now() - t0).toFixed(1));
    Array.prototype.forEach.call(document.querySelectorAll("#celltable th button"), function (b) {
      var k = b.getAttribute("data-key");
      b.parentNode.setAttribute("aria-sort", k === cellsState.sort ? (cellsState.dir > 0 ? "ascending" : "descending") : "none");
    });
  }
  function renderCells(query) {
    var q = parseQuery(query);
    cellsState = { filters: {}, q: q.q || "", sort: q.sort || "seq", dir: q.dir === "desc" ? -1 : 1 };
    FILTERS.forEach(function (f) { cellsState.filters[f[0]] = q[f[0]] || ""; });
    return Promise.all([load("cells", !BUNDLE), load("run")]).then(function (res) {
      var data = res[0], run = res[1];
      setBanner(run.simulated, run.provider_line);
      var rows = cellObjects(data);
      var html = "<h1>Cells</h1>" + (run.simulated ? '<p class="simtext">SIMULATED provider: every trajectory below comes from the deterministic simulation.</p>' : "");
      html += '<form id="filters" class="filters">';
      FILTERS.forEach(function (f) {
        var vals = {};
        rows.forEach(function (o) { vals[String(o[f[0]])] = 1; });
        html += '<label>' + esc(f[1]) + ' <select name="' + f[0] + '"><option value="">all</option>' +
          Object.keys(vals).sort().map(function (v) { return '<option' + (cellsState.filters[f[0]] === v ? " selected" : "") + ' value="' + esc(v) + '">' + esc(v) + "</option>"; }).join("") + "</select></label>";
      });
      html += '<label>search <input id="q" name="q" type="search" value="' + esc(cellsState.q) + '" placeholder="cell id, outcome, stop reason"></label>';
      html += '<output id="count"></output></form>';
      html += '<div class="tablewrap"><table id="celltable"><thead><tr>' + SHOWN.map(function (c) {
        return '<th scope="col"><button type="button" data-key="' + c[0] + '">' + esc(c[1]) + "</button></th>";
      }).join("") + '<th scope="col">view</th></tr></thead><tbody id="cellbody"></tbody></table></div>';
      html += '<p class="legend" id="legend">outcomes: ' + OUTCOMES.map(function (k) { return '<span class="oc oc-' + k[0] + '">' + esc(k[0]) + "</span> " + esc(k[1]); }).join(" · ") + "</p>";
      main.innerHTML = html;
      fillTable(rows);
      var form = document.getElementById("filters");
      form.addEventListener("change", function (e) {
        if (e.target.name && e.target.name !== "q") cellsState.filters[e.target.name] = e.target.value;
        fillTable(rows); history.replaceState(null, "", cellsHash());
      });
      document.getElementById("q").addEventListener("input", function (e) {
        cellsState.q = e.target.value; fillTable(rows); history.replaceState(null, "", cellsHash());
      });
      document.querySelector("#celltable thead").addEventListener("click", function (e) {
        var k = e.target.getAttribute && e.target.getAttribute("data-key");
        if (!k) return;
        if (cellsState.sort === k) cellsState.dir = -cellsState.dir; else { cellsState.sort = k; cellsState.dir = 1; }
        fillTable(rows); history.replaceState(null, "", cellsHash());
      });
      document.getElementById("cellbody").addEventListener("keydown", function (e) {
        if (e.key === "Enter" && e.target.getAttribute("data-seq")) location.hash = "#/cell/" + e.target.getAttribute("data-seq");
      });
      document.getElementById("cellbody").addEventListener("dblclick", function (e) {
        var tr = e.target.closest("tr"); if (tr) location.hash = "#/cell/" + tr.getAttribute("data-seq");
      });
      if (!BUNDLE) {
        pollTimer = setInterval(function () {
          load("cells", true).then(function (d) {
            if (d.rows.length !== rows.length) {
              rows = cellObjects(d); fillTable(rows);
              document.getElementById("live").textContent = rows.length + " cells committed";
            }
          }).catch(function () {});
        }, 3000);
      }
    });
  }

  /* ---------------------------------------------------------------- one trajectory */
  function actionLine(a) {
    if (!a) return "";
    if (a.kind === "tool_call") return "tool call <code>" + esc(a.tool_id) + "</code>";
    if (a.kind === "finish") return "finish with a certificate (" + esc(((a.certificate || {}).claims || []).length) + " claim(s))";
    return esc(a.kind) + (a.reason ? ": " + esc(a.reason) : "");
  }
  /* The request's messages as (role, text), from its raw canonical body (as runner.view's
     render_request does for the terminal). */
  function renderRequest(raw) {
    var req, out = [];
    try { req = JSON.parse(raw); } catch (e) { return out; }
    if (!req || typeof req !== "object") return out;
    if (typeof req.system === "string") out.push({ role: "system", text: req.system });
    (req.messages || []).forEach(function (m) {
      var texts = [], other = [];
      (m.parts || []).forEach(function (p) {
        if (!p || typeof p !== "object") return;
        if ("text" in p) texts.push(String(p.text));
        else { var k = Object.keys(p)[0]; if (k) other.push("[" + k + "] " + JSON.stringify(p[k])); }
      });
      var text = texts.join("\n");
      if (other.length) text += (text ? "\n" : "") + other.join("\n");
      out.push({ role: String(m.role || "user"), text: text });
    });
    return out;
  }
  function callBlock(c, label) {
    if (!c) return "<p>No provider call recorded for this decision.</p>";
    var h = "<details class=\"req\"><summary>" + esc(label) + " request <code>" + esc(c.request_digest) + "</code> " + badge(c.ok, "ok", "failed") + (c.attempts > 1 ? " " + esc(c.attempts) + " attempts" : "") + "</summary>";
    renderRequest(c.raw_request).forEach(function (m) { h += '<div class="msg"><span class="role">' + esc(m.role) + "</span><pre>" + esc(m.text) + "</pre></div>"; });
    h += "<details class=\"raw\"><summary>raw canonical request body (" + esc(c.raw_request.length) + " bytes)</summary><pre class=\"rawbody\">" + esc(c.raw_request) + "</pre></details>";
    if (c.failure) h += "<p class=\"error\">failure: " + esc(JSON.stringify(c.failure)) + "</p>";
    h += "<details class=\"raw\"><summary>parsed response</summary>" + pre(c.response) + "</details></details>";
    return h;
  }
  function stepHtml(s) {
    var h = '<section class="step" tabindex="0" id="step-' + esc(s.index) + '"><h3>Decision ' + esc(s.index) + ' <span class="verdict">' + esc(s.verdict) + "</span></h3>";
    h += callBlock(s.request, "model");
    h += "<p><strong>Parsed action:</strong> " + actionLine(s.action) + "</p>";
    h += "<details><summary>action JSON</summary>" + pre(s.action) + "</details>";
    if (s.tool) {
      var t = s.tool;
      h += '<div class="tool"><h4>Tool call <code>' + esc(t.call_id || "") + "</code> <code>" + esc(t.tool_id) + "</code></h4>";
      h += "<p>arguments</p>" + pre(t.args);
      if (t.error) h += '<p class="error">sandbox error: ' + esc(t.error) + "</p>";
      else h += "<details><summary>sandbox result</summary>" + pre(t.response) + "</details>";
      h += '<table class="receipts"><caption>' + esc(t.receipts.length) + " receipt(s)</caption><thead><tr><th>receipt</th><th>scope</th><th>value</th><th>status</th><th>validation</th><th>source path</th></tr></thead><tbody>";
      t.receipts.forEach(function (r) {
        h += '<tr class="receipt"><td><code>' + esc(r.receipt_id) + "</code></td><td>" + esc(JSON.stringify(r.scope)) + "</td><td>" + esc(JSON.stringify(r.value)) + "</td><td>" + esc(r.exec_status) + "</td><td>" + esc(r.validation) + "</td><td><code>" + esc(r.source_path) + "</code></td></tr>";
      });
      h += "</tbody></table></div>";
    }
    if (s.pipeline) {
      var p = s.pipeline;
      h += '<div class="pipeline"><h4>Termination pipeline: <span class="decision">' + esc(p.decision) + "</span></h4>";
      if (p.missing_slots.length) h += "<p>Missing or unsupported slots: " + p.missing_slots.map(function (x) { return '<code class="slot">' + esc(x) + "</code>"; }).join(" ") + "</p>";
      if (p.reasons.length) {
        h += "<table class=\"reasons\"><thead><tr><th>reason code</th><th>slot</th><th>detail</th></tr></thead><tbody>";
        p.reasons.forEach(function (r) { h += '<tr><td><code class="reason">' + esc(r.code) + "</code></td><td>" + esc(r.slot) + "</td><td>" + esc(r.detail) + "</td></tr>"; });
        h += "</tbody></table>";
      } else h += "<p>No reason codes: the finish passed.</p>";
      p.critic_calls.forEach(function (c, i) {
        h += '<div class="critic"><p><strong>Critic verdict ' + (i + 1) + ":</strong> " + esc(c && c.response_text ? c.response_text : "(no text)") + "</p>" + callBlock(c, "critic") + "</div>";
      });
      if (p.directive) h += "<details><summary>directive fed back to the planner</summary><pre>" + esc(p.directive) + "</pre></details>";
      h += "</div>";
    }
    return h + "</section>";
  }
  function renderCell(seq) {
    return Promise.all([load("cell-" + seq), load("run"), load("cells")]).then(function (res) {
      var c = res[0], run = res[1];
      setBanner(run.simulated, run.provider_line);
      var o = c.outcome || {};
      var html = '<p class="crumbs"><a href="' + cellsHash() + '">cells</a> › ' + esc(c.cell_id) + '</p><h1>Trajectory <code id="cellid">' + esc(c.cell_id) + "</code></h1>";
      if (c.simulated) html += '<p class="simtext">SIMULATED provider (' + esc(c.provider) + "/" + esc(c.model) + "): these requests and answers come from the deterministic simulation.</p>";
      html += '<dl class="facts"><dt>row</dt><dd>' + esc(c.row) + "</dd><dt>task</dt><dd>" + esc(o.task_id) + "</dd><dt>family</dt><dd>" + esc(o.family) + "</dd><dt>checkpoint</dt><dd>" + esc(o.checkpoint) + "</dd><dt>fault</dt><dd>" + esc(o.fault) + "</dd><dt>pipeline</dt><dd>" + esc(o.policy) + "</dd>";
      html += "<dt>outcome</dt><dd>" + esc(c.outcome_label) + '</dd><dt>stop reason</dt><dd id="stopreason">' + esc(c.stop && c.stop.reason) + " — " + esc(c.stop && c.stop.detail) + "</dd><dt>turns / calls</dt><dd>" + esc(o.turns) + " / " + esc(o.tool_calls) + "</dd><dt>cost</dt><dd>$" + esc(o.cost_usd) + "</dd></dl>";
      html += '<p><a href="#/compare/' + c.seq + '">the four pipelines side by side</a></p>';
      if (c.prior_trace && c.prior_trace.length) html += "<details><summary>" + esc(c.prior_trace.length) + " tool call(s) already in the checkpoint's trace</summary>" + pre(c.prior_trace) + "</details>";
      html += '<div id="steps">' + c.steps.map(stepHtml).join("") + "</div>";
      html += '<section class="card"><h2>Stop</h2><p>' + esc(c.stop && c.stop.reason) + ": " + esc(c.stop && c.stop.detail) + "</p>" + (c.final_certificate ? "<details><summary>final certificate</summary>" + pre(c.final_certificate) + "</details>" : "") + "</section>";
      var ch = c.chain;
      if (ch.error) {
        html += '<section class="card" id="proof"><h2>Chain position and Merkle inclusion</h2><p class="error" role="alert">' + badge(false, "", "DAMAGED") + " record " + esc(ch.seq) + ": no inclusion proof: " + esc(ch.error) + "</p></section>";
        main.innerHTML = html;
        return;
      }
      html += '<section class="card" id="proof"><h2>Chain position and Merkle inclusion</h2><dl><dt>record</dt><dd>' + esc(ch.seq) + "</dd><dt>leaf</dt><dd><code>" + esc(ch.leaf) + "</code></dd><dt>chain</dt><dd><code>" + esc(ch.chain) + "</code></dd>";
      html += "<dt>tree size</dt><dd>" + esc(ch.tree_size) + (ch.signed ? " (the latest signed checkpoint)" : " (current tree; not yet covered by a signed checkpoint)") + "</dd><dt>root</dt><dd><code>" + esc(ch.root) + "</code></dd>";
      html += "<dt>proof</dt><dd>" + ch.proof.map(function (p) { return "<code>" + esc(p) + "</code>"; }).join("<br>") + "</dd><dt>" + (BUNDLE ? "checked when the bundle was written" : "server check") + "</dt><dd>" + badge(ch.server_verified, "verified", "FAILED") + "</dd>";
      html += '<dt>in this page</dt><dd id="jsproof">checking…</dd></dl></section>';
      main.innerHTML = html;
      checkChain(ch).then(function (r) {
        var ok = r.leafOk && r.chainOk && r.inclusionOk && r.signedRootOk !== false && r.bodyCell === c.cell_id;
        var el = document.getElementById("jsproof");
        el.setAttribute("data-ok", ok ? "yes" : "no");
        el.innerHTML = badge(ok, "verified in the page", "FAILED in the page") + " (SHA-256 " + (subtle ? "by SubtleCrypto" : "in plain JS") + "): leaf = sha256(0x00 ‖ record body) " + badge(r.leafOk, "matches", "differs") +
          "; chain link sha256(0x02 ‖ store id ‖ seq ‖ previous chain ‖ leaf) " + badge(r.chainOk, "matches", "differs") +
          "; RFC 9162 inclusion proof " + badge(r.inclusionOk, "reaches the root", "fails") +
          (r.signedRootOk === null ? "" : "; root " + badge(r.signedRootOk, "equals the signed checkpoint's", "differs from the signed checkpoint's")) +
          "; the proven body is cell <code>" + esc(r.bodyCell) + "</code>, result digest <code>" + esc(r.bodyDigest) + "</code>.";
      });
    });
  }

  /* ---------------------------------------------------------------- pipelines side by side */
  function renderCompare(seq) {
    return Promise.all([load("cells"), load("run")]).then(function (res) {
      var rows = cellObjects(res[0]), run = res[1];
      setBanner(run.simulated, run.provider_line);
      var me = rows.filter(function (o) { return o.seq === seq; })[0];
      if (!me) throw new Error("no cell " + seq);
      if (me.damage) throw new Error(me.damage);
      var same = rows.filter(function (o) { return o.task_id === me.task_id && o.checkpoint === me.checkpoint && o.seed_index === me.seed_index; });
      var damaged = rows.filter(function (o) { return o.damage; });
      return Promise.all(same.map(function (o) { return load("cell-" + o.seq); })).then(function (cells) {
        var html = '<h1>Pipelines side by side</h1><p>' + esc(me.task_id) + " · " + esc(me.checkpoint) + " · seed " + esc(me.seed_index) + (me.fault ? " · fault " + esc(me.fault) : "") + (run.simulated ? ' <span class="simtext">(SIMULATED provider)</span>' : "") + '</p><div class="compare">';
        cells.forEach(function (c) {
          var o = c.outcome || {};
          html += '<section class="col" tabindex="0"><h2><a href="#/cell/' + c.seq + '">' + esc(o.policy) + "</a></h2><p>" + esc(c.outcome_label) + " · " + esc(c.stop && c.stop.reason) + "<br>" + esc(o.turns) + " turns, " + esc(o.tool_calls) + " calls, $" + esc(o.cost_usd) + "</p><ol>";
          c.steps.forEach(function (s) {
            html += "<li>" + actionLine(s.action) + " → <em>" + esc(s.verdict) + "</em>";
            if (s.pipeline && s.pipeline.reasons.length) html += "<br>" + s.pipeline.reasons.map(function (r) { return '<code class="reason">' + esc(r.code) + "</code>"; }).join(" ");
            html += "</li>";
          });
          html += "</ol></section>";
        });
        html += "</div>";
        if (damaged.length) html += '<p class="error" id="comparedamage">' + esc(same.length) + " pipeline(s) shown; " + esc(damaged.length) + " record(s) of this store could not be read and a pipeline missing here may be one of them: " + damaged.map(function (o) { return esc(o.damage.split(":")[0]); }).join("; ") + "</p>";
        main.innerHTML = html;
      });
    });
  }

  /* ---------------------------------------------------------------- static study */
  function renderStatic(query) {
    return load("static").then(function (s) {
      setBanner(s.simulated, s.provider_line);
      var q = parseQuery(query);
      var html = "<h1>Static study <code>" + esc(s.directory) + "</code></h1>";
      // The outcome is in words (a simulated gate is never a bare pass/fail); older results lack it.
      if (s.h1) html += "<p>H1: " + (s.h1.outcome ? badge(s.h1.passed, s.h1.outcome, s.h1.outcome) : badge(s.h1.passed, "passed", "FAILED")) + "</p>";
      html += '<form class="filters"><label>search <input id="q" type="search" value="' + esc(q.q || "") + '" placeholder="snapshot id, condition"></label><output id="count"></output></form>';
      html += '<table id="celltable"><thead><tr><th>snapshot</th><th>family</th><th>split</th><th>condition</th><th>gold</th>' + s.arms.map(function (a) { return "<th>" + esc(a) + "</th>"; }).join("") + '</tr></thead><tbody id="cellbody"></tbody></table>';
      main.innerHTML = html;
      function fill() {
        var needle = document.getElementById("q").value.toLowerCase();
        var vis = s.snapshots.filter(function (r) { return !needle || (r.snapshot_id + " " + r.condition).toLowerCase().indexOf(needle) >= 0; });
        document.getElementById("cellbody").innerHTML = vis.map(function (r) {
          return '<tr tabindex="0" data-seq="' + r.index + '"><td><a href="#/snapshot/' + r.index + '">' + esc(r.snapshot_id) + "</a></td><td>" + esc(r.family) + "</td><td>" + esc(r.split) + "</td><td>" + esc(r.condition) + "</td><td>" + esc(r.gold) + "</td>" +
            s.arms.map(function (a) { var d = r.decisions[a]; return '<td class="' + (d === r.gold ? "agree" : "disagree") + '">' + esc(d) + "</td>"; }).join("") + "</tr>";
        }).join("");
        document.getElementById("count").textContent = vis.length + " of " + s.snapshots.length + " snapshots";
      }
      fill();
      document.getElementById("q").addEventListener("input", fill);
      document.getElementById("cellbody").addEventListener("keydown", function (e) {
        if (e.key === "Enter" && e.target.getAttribute("data-seq")) location.hash = "#/snapshot/" + e.target.getAttribute("data-seq");
      });
    });
  }
  function renderSnapshot(i) {
    return Promise.all([load("snapshot-" + i), load("static")]).then(function (res) {
      var d = res[0], s = res[1];
      setBanner(s.simulated, s.provider_line);
      var html = '<p class="crumbs"><a href="#/">snapshots</a> › ' + esc(d.snapshot_id) + "</p><h1>Snapshot <code>" + esc(d.snapshot_id) + "</code></h1>";
      html += "<h2>Decisions</h2><table class=\"reasons\"><thead><tr><th>policy</th><th>ablated check</th><th>decision</th><th>reason codes</th><th>model calls</th></tr></thead><tbody>";
      d.decisions.forEach(function (r) {
        html += "<tr><td>" + esc(r.arm) + "</td><td>" + esc(r.ablate || "—") + "</td><td>" + esc(r.decision) + "</td><td>" + (r.reasons || []).map(function (c) { return '<code class="reason">' + esc(c) + "</code>"; }).join(" ") + "</td><td>" + esc(r.model_calls) + "</td></tr>";
      });
      html += "</tbody></table>";
      if (d.rebuilt) {
        html += '<p class="note">Contract, ledger and certificate are rebuilt from runner.worlds (deterministic, pinned by the task manifest).</p>';
        html += "<h2>Contract</h2>" + pre(d.contract) + "<h2>Certificate</h2>" + pre(d.snapshot.certificate) + "<h2>Ledger</h2>" + pre(d.snapshot.ledger) + "<details><summary>trace</summary>" + pre(d.snapshot.trace) + "</details>";
      } else html += "<p>This snapshot id is not in this version's static grid.</p>";
      main.innerHTML = html;
    });
  }

  /* ---------------------------------------------------------------- routing and keys */
  function route() {
    if (pollTimer) { clearInterval(pollTimer); pollTimer = null; }
    var h = location.hash.replace(/^#\/?/, "");
    var qi = h.indexOf("?"), path = qi < 0 ? h : h.slice(0, qi), query = qi < 0 ? "" : h.slice(qi + 1);
    var parts = path.split("/");
    var done;
    if (STATIC) {
      nav([["snapshots", "#/"]]);
      done = parts[0] === "snapshot" ? renderSnapshot(+parts[1]) : renderStatic(query);
    } else {
      nav([["run", "#/"], ["cells", "#/cells"]]);
      if (parts[0] === "cells") done = renderCells(query);
      else if (parts[0] === "cell") done = renderCell(+parts[1]);
      else if (parts[0] === "compare") done = renderCompare(+parts[1]);
      else done = renderRun();
    }
    done.then(function () {
      void main.offsetHeight; /* force layout: data-ms is navigation start to a laid-out page */
      document.body.setAttribute("data-ms", String(Math.round(performance.now())));
      document.body.setAttribute("data-ready", location.hash || "#/");
    }, function (e) { fail(e); document.body.setAttribute("data-ready", "error"); });
  }
  function moveRow(delta) {
    var rows = Array.prototype.slice.call(document.querySelectorAll("#cellbody tr, .step, .compare .col"));
    if (!rows.length) return;
    var i = rows.indexOf(document.activeElement);
    var next = rows[Math.max(0, Math.min(rows.length - 1, i < 0 ? 0 : i + delta))];
    next.focus(); next.scrollIntoView({ block: "nearest" });
  }
  function neighbour(delta) {
    var m = location.hash.match(/^#\/(cell|compare)\/(\d+)/);
    if (!m || !cache.cells) return;
    var seqs = cache.cells.rows.map(function (r) { return r[0]; });
    var i = seqs.indexOf(+m[2]) + delta;
    if (i >= 0 && i < seqs.length) location.hash = "#/" + m[1] + "/" + seqs[i];
  }
  document.addEventListener("keydown", function (e) {
    var t = e.target.tagName;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (t === "INPUT" || t === "SELECT" || t === "TEXTAREA") { if (e.key === "Escape") e.target.blur(); return; }
    if (e.key === "/") { var f = document.querySelector("#filters select, #q"); if (f) { e.preventDefault(); f.focus(); } }
    else if (e.key === "ArrowDown" || e.key === "j") { e.preventDefault(); moveRow(1); }
    else if (e.key === "ArrowUp" || e.key === "k") { e.preventDefault(); moveRow(-1); }
    else if (e.key === "r" && !STATIC) location.hash = "#/";
    else if (e.key === "c" && !STATIC) location.hash = cellsHash();
    else if (e.key === "[") neighbour(-1);
    else if (e.key === "]") neighbour(1);
    else if (e.key === "v") { var m = location.hash.match(/^#\/cell\/(\d+)/); if (m) location.hash = "#/compare/" + m[1]; }
    else if (e.key === "Escape") location.hash = STATIC ? "#/" : cellsHash();
  });
  document.addEventListener("submit", function (e) { e.preventDefault(); });
  window.addEventListener("hashchange", route);
  route();
})();
