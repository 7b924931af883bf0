/// The console's two static files, served from 'self' so the Content-Security-Policy needs no
/// inline script or style. The pages work without the script; it only keeps the queue counts
/// current through server-sent events.
enum StaticFiles {
    /// Light and dark from the browser's preference; tables scroll sideways on a phone.
    static let css = """
        :root { color-scheme: light dark; --bg: #fff; --fg: #1b1f24; --muted: #57606a; --line: #d0d7de;
          --accent: #0a58ca; --bad: #b42318; --good: #1a7f37; --warn: #9a6700; --panel: #f6f8fa; }
        @media (prefers-color-scheme: dark) {
          :root { --bg: #0d1117; --fg: #e6edf3; --muted: #9198a1; --line: #30363d; --accent: #58a6ff;
            --bad: #ff7b72; --good: #56d364; --warn: #e3b341; --panel: #161b22; } }
        * { box-sizing: border-box; }
        body { margin: 0; font: 16px/1.5 system-ui, sans-serif; background: var(--bg); color: var(--fg); }
        a { color: var(--accent); }
        .skip { position: absolute; left: -999px; } .skip:focus { left: 1rem; top: 1rem; }
        header { border-bottom: 1px solid var(--line); background: var(--panel); }
        nav { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem 1.5rem; padding: .5rem 1rem; }
        nav ul { display: flex; flex-wrap: wrap; gap: 1rem; list-style: none; margin: 0; padding: 0; }
        nav a[aria-current] { font-weight: 700; text-decoration: none; }
        .brand { font-weight: 700; text-decoration: none; color: var(--fg); }
        .logout { margin-left: auto; display: flex; gap: .5rem; align-items: center; }
        main { padding: 1rem; max-width: 80rem; margin: 0 auto; }
        .banner, .notice, .problem { padding: .5rem 1rem; margin: 0; }
        .banner { background: var(--panel); color: var(--warn); }
        .notice { border-left: 4px solid var(--good); background: var(--panel); }
        .problem { border-left: 4px solid var(--bad); background: var(--panel); }
        .wrap { overflow-x: auto; }
        table { border-collapse: collapse; width: 100%; }
        th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
        thead th { font-size: .85rem; color: var(--muted); }
        td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
        td.url, .url code, td.error { word-break: break-all; }
        .error { color: var(--bad); }
        .state { font-size: .85rem; padding: 0 .4rem; border: 1px solid var(--line); border-radius: 1rem; }
        .state.dead { color: var(--bad); } .state.succeeded { color: var(--good); } .state.retrying { color: var(--warn); }
        form { margin: 0; }
        button, .button { font: inherit; padding: .3rem .8rem; border: 1px solid var(--line); border-radius: .3rem;
          background: var(--panel); color: var(--fg); cursor: pointer; text-decoration: none; display: inline-block; }
        input, select { font: inherit; padding: .3rem; border: 1px solid var(--line); border-radius: .3rem;
          background: var(--bg); color: var(--fg); max-width: 100%; }
        .filters { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: end; margin-bottom: 1rem; }
        .filters p { margin: 0; display: flex; flex-direction: column; }
        .login { max-width: 24rem; } .login input { width: 100%; }
        .login p { display: flex; flex-direction: column; }
        .hint { color: var(--muted); font-size: .9rem; }
        .facts { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
        .facts dt { color: var(--muted); } .facts dd { margin: 0; }
        pre { background: var(--panel); padding: .6rem; overflow-x: auto; white-space: pre-wrap; word-break: break-all; }
        .timeline { list-style: none; padding-left: 1rem; border-left: 3px solid var(--line); }
        .timeline li { margin: 0 0 1rem; position: relative; }
        .timeline li::before { content: ""; position: absolute; left: -1.45rem; top: .45rem; width: .7rem; height: .7rem;
          border-radius: 50%; background: var(--muted); }
        .timeline li.ok::before { background: var(--good); } .timeline li.failed::before { background: var(--bad); }
        .timeline p { margin: 0; }
        .pages { display: flex; gap: 1rem; margin-top: 1rem; }
        .chart { display: block; width: 100%; height: 4rem; color: var(--accent); border-bottom: 1px solid var(--line); }
        h2 { font-size: 1.1rem; margin-top: 1.5rem; }
        .secret { display: block; padding: .6rem; background: var(--panel); border: 1px solid var(--line);
          font-size: 1.05rem; word-break: break-all; user-select: all; }
        .header-names { margin: 0; padding-left: 1.2rem; }
        @media (max-width: 40rem) { th, td { padding: .3rem; } body { font-size: 15px; } }
        """

    /// Subscribes to `/events` (one shared reader on the server) and writes the numbers into
    /// the queue table's cells.
    static let liveJS = """
        "use strict";
        (function () {
          var table = document.getElementById("queues");
          var status = document.getElementById("live-status");
          if (!table || !window.EventSource) { return; }
          var source = new EventSource("/events");
          source.addEventListener("queues", function (message) {
            var data;
            try { data = JSON.parse(message.data); } catch (e) { return; }
            data.queues.forEach(function (queue) {
              var rows = table.querySelectorAll("tr[data-queue]");
              for (var i = 0; i < rows.length; i++) {
                if (rows[i].getAttribute("data-queue") !== queue.name) { continue; }
                ["pending", "running", "retrying", "dead", "lag"].forEach(function (field) {
                  var cell = rows[i].querySelector("[data-field='" + field + "']");
                  if (!cell) { return; }
                  var target = cell.querySelector("a") || cell;
                  target.textContent = String(queue[field]);
                });
              }
            });
            if (status) { status.textContent = "Live: updated " + new Date().toLocaleTimeString(); }
          });
          source.addEventListener("problem", function () {
            if (status) { status.textContent = "Live updates paused: the database did not answer"; }
          });
          source.onerror = function () {
            if (status) { status.textContent = "Live updates disconnected; reload to reconnect"; }
          };
        })();
        """
}
