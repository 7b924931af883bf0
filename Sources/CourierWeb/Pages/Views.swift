import CourierCore
import Foundation

// The values each template renders, one struct per page. swift-mustache reads them through
// reflection, so a property's name is the template's key and only stored properties count;
// a nil optional is a missing key (a section that does not show, a lookup that climbs to the
// enclosing value). Everything that came from the database is a `Shown`, redacted as it was
// built; the tests check every template key against these properties.

/// The layout around every page: title, navigation, the logout form, notice and problem.
struct LayoutView {
    let title: String
    /// A page that the page templates rendered (the one triple mustache).
    let content: String
    /// The logged-in name; nil on the login page, which then shows no navigation.
    let user: String?
    /// The session's CSRF token for the logout form; empty without a session.
    let csrf: String
    let nav: [NavigationItem]
    let readOnly: Bool
    /// Whether the page loads the live-update script.
    let live: Bool
    /// What the last action did (the session's notice).
    let notice: String?
    /// Why the page shows less than asked for.
    let problem: String?
}

/// One link of the navigation bar.
struct NavigationItem {
    let href: String
    let label: String
    /// Whether the page shown is in this link's section.
    let current: Bool
}

/// A page's own values with what every page template shares: the session's CSRF token for
/// its forms, and whether actions are shown. The `content` template renders `view` inside a
/// section, so the page's keys are found in `view` and the shared ones here.
struct PageContent<View> {
    /// The name of the page's template.
    let template: String
    let csrf: String
    let actions: Bool
    let view: View
}

/// The login form.
struct LoginView {
    /// Where to go after logging in: a path of this console.
    let next: String
    /// The name given, when the form comes back with a problem.
    let name: Shown?
}

/// A message: not found, refused, read-only, something went wrong.
struct MessageView {
    let heading: String
    let text: Shown
    /// A link back, when there is an obvious place to go.
    let back: String?
}

/// `/queues`: totals over every queue, per queue its counts and state, and the last hour of
/// attempts.
struct QueuesView {
    let queues: [Row]
    let hasQueues: Bool
    let totals: Totals
    let traffic: TrafficView

    /// One queue.
    struct Row {
        let name: Shown
        /// The queue's page (nil for a name no path carries).
        let path: String?
        /// The name as a query value, for the links to its jobs.
        let query: String
        let paused: Bool
        let pending: Int
        let running: Int
        let retrying: Int
        let dead: Int
        let succeeded: Int
        let lag: String
    }

    /// Every queue together.
    struct Totals {
        let pending: Int
        let running: Int
        let retrying: Int
        let dead: Int
        let succeeded: Int
    }

    init(_ queues: [QueueOverview], traffic: Traffic) {
        self.queues = queues.map { queue in
            Row(
                name: .text(queue.name), path: ConsolePath.queue(queue.name), query: FormData.encode(queue.name),
                paused: queue.paused, pending: queue.jobs[.pending] ?? 0, running: queue.jobs[.running] ?? 0,
                retrying: queue.jobs[.retrying] ?? 0, dead: queue.jobs[.dead] ?? 0,
                succeeded: queue.jobs[.succeeded] ?? 0, lag: PageFormat.age(queue.lag.seconds))
        }
        hasQueues = !queues.isEmpty
        func total(_ state: JobState) -> Int { queues.reduce(0) { $0 + ($1.jobs[state] ?? 0) } }
        totals = Totals(
            pending: total(.pending), running: total(.running), retrying: total(.retrying), dead: total(.dead),
            succeeded: total(.succeeded))
        self.traffic = TrafficView(traffic, scope: "all queues")
    }
}

/// The last hour of attempts of all queues, one queue or one host: the chart and its figures
/// (the `traffic` partial).
struct TrafficView {
    let chart: TrafficChart
    /// Whose attempts, in words (`all queues`, `this queue`, `this host`).
    let scope: String
    let delivered: Int
    let failed: Int
    let errorRate: String
    let hasLatency: Bool
    let p50: String
    let p95: String
    let p99: String

    init(_ traffic: Traffic, scope: String) {
        chart = TrafficChart(traffic)
        self.scope = scope
        delivered = traffic.delivered
        failed = traffic.failed
        errorRate = traffic.errorRate.map(TrafficChart.percent) ?? "none"
        hasLatency = traffic.p50 != nil
        p50 = traffic.p50.map(PageFormat.milliseconds) ?? "-"
        p95 = traffic.p95.map(PageFormat.milliseconds) ?? "-"
        p99 = traffic.p99.map(PageFormat.milliseconds) ?? "-"
    }
}

/// One fact of a settings list: its name and value (the console's words and numbers; nothing
/// stored but numbers and durations).
struct SettingItem {
    let label: String
    let value: String
}

/// `/queues/<name>`: one queue's counts by state, its last hour and its settings.
struct QueueView {
    let name: Shown
    /// This page, where pausing and resuming come back to.
    let path: String?
    /// The name as a query value, for the links to its jobs.
    let query: String
    let paused: Bool
    let states: [StateCount]
    let lag: String
    let traffic: TrafficView
    let settings: [SettingItem]
    /// What "succeeded" covers: the retention in force.
    let keptSucceeded: String

    /// One state and its jobs.
    struct StateCount {
        let state: String
        let jobs: Int
        /// The list of those jobs.
        let link: String
    }

    init(_ queue: QueueDetail, traffic: Traffic) {
        name = .text(queue.name)
        path = ConsolePath.queue(queue.name)
        query = FormData.encode(queue.name)
        paused = queue.paused
        let query = self.query
        states = JobState.allCases.map { state in
            StateCount(
                state: state.rawValue, jobs: queue.jobs[state] ?? 0,
                link: (state == .dead ? "/dead?queue=" : "/jobs?state=\(state.rawValue)&queue=") + query)
        }
        lag = PageFormat.age(queue.lag.seconds)
        self.traffic = TrafficView(traffic, scope: "this queue")
        keptSucceeded = queue.keepSucceeded.map { PageFormat.age($0.inSeconds) } ?? "7d (the worker's default)"
        settings = [
            SettingItem(label: "State", value: queue.paused ? "paused: workers skip it" : "active"),
            SettingItem(
                label: "Max attempts",
                value: queue.maxAttempts.map(String.init) ?? "\(Defaults.maxAttempts) (default)"),
            SettingItem(
                label: "Retry schedule",
                value: queue.retrySchedule.map { $0.isEmpty ? "none" : $0.map { PageFormat.age($0.inSeconds) }.joined(separator: ", ") }
                    ?? "default (exponential backoff)"),
            SettingItem(
                label: "Max in flight", value: queue.maxInFlight.map { "\($0) per worker" } ?? "no cap of its own"),
            SettingItem(label: "Signing secret", value: queue.signed ? "set (never shown)" : "not set"),
            SettingItem(label: "OAuth2 token", value: queue.oauth ? "set (credentials never shown)" : "not set"),
            SettingItem(
                label: "Keeps succeeded jobs",
                value: queue.keepSucceeded.map { PageFormat.age($0.inSeconds) } ?? "the worker's default (7d)"),
            SettingItem(
                label: "Keeps dead jobs", value: queue.keepDead.map { PageFormat.age($0.inSeconds) } ?? "the worker's default (30d)"),
            SettingItem(
                label: "Schedules ahead at most",
                value: queue.maxScheduleAhead.map { PageFormat.age($0.inSeconds) } ?? "no limit of its own"),
        ]
    }
}

/// `/destinations/<host>`: one host's waiting and running jobs, its last hour, cap, rate
/// limit, breaker and whether it is disabled.
struct DestinationView {
    let host: Shown
    /// This page, where disabling and enabling come back to.
    let path: String?
    let query: String
    let due: Int
    let later: Int
    let running: Int
    let disabled: Bool
    let disabledAt: String?
    let disabledReason: Shown?
    let breaker: Shown
    let traffic: TrafficView
    let settings: [SettingItem]

    init(_ destination: DestinationInfo?, host: String, traffic: Traffic) {
        self.host = .text(host)
        path = ConsolePath.destination(host)
        query = FormData.encode(host)
        due = destination?.due ?? 0
        later = destination?.later ?? 0
        running = destination?.running ?? 0
        disabled = destination?.disabledAt != nil
        disabledAt = destination?.disabledAt.map(PageFormat.time)
        disabledReason = destination?.disabledReason.map { .message($0) }
        breaker = .text(destination?.breaker ?? "closed")
        self.traffic = TrafficView(traffic, scope: "this host")
        guard let d = destination else {
            settings = [SettingItem(label: "Settings", value: "none: the workers' defaults")]
            return
        }
        var items = [
            SettingItem(label: "Cap", value: d.maxInFlightIsDefault ? "\(d.maxInFlight) in flight (the workers' default)" : "\(d.maxInFlight) in flight"),
            SettingItem(label: "Rate limit", value: d.rateLimit.map { String(format: "%g requests a second", $0) } ?? "none"),
            SettingItem(label: "Failure streak", value: "\(d.failureStreak) of \(d.breakerThreshold) that open the breaker"),
            SettingItem(label: "Breaker cooldown", value: PageFormat.age(d.breakerCooldown.inSeconds)),
        ]
        if let opened = d.openedAt { items.append(SettingItem(label: "Breaker opened", value: PageFormat.time(opened))) }
        if let probe = d.probeAt { items.append(SettingItem(label: "Next probe", value: PageFormat.time(probe))) }
        items.append(SettingItem(label: "410 Gone", value: d.disableOnGone ? "disables the host" : "kills only that job"))
        if let success = d.lastSuccessAt { items.append(SettingItem(label: "Last answer", value: PageFormat.time(success))) }
        if let failure = d.lastFailureAt { items.append(SettingItem(label: "Last failure", value: PageFormat.time(failure))) }
        settings = items
    }
}

/// `/jobs` and `/dead`: the filter form, a page of jobs and the links around it.
struct JobsView {
    // The filter form (the `filters` partial).
    /// Where the form goes: the list itself.
    let action: String
    /// The fields as given, to fill the form again (the operator's own input).
    let filter: FilterValues
    let showState: Bool
    let showHost: Bool
    let showError: Bool
    let states: [StateOption]
    let sinceLabel: String

    // The list.
    let heading: String
    let timeLabel: String
    /// Whether each row has a requeue button (dead letters, not read-only).
    let rowActions: Bool
    let hasJobs: Bool
    let jobs: [Row]
    /// This page's address, where a row's requeue comes back to.
    let back: String?
    let nextPage: String?
    let firstPage: String?
    /// What a page with a substring filter examined, when it stopped at its window.
    let searched: String?
    let requeueAllLink: String?

    /// The form's fields.
    struct FilterValues {
        let queue: String?
        let state: String?
        let host: String?
        let url: String?
        let error: String?
        let since: String?
        let until: String?
    }

    /// One option of the state menu.
    struct StateOption {
        let value: String
        let label: String
        let selected: Bool
    }

    /// One job.
    struct Row {
        let id: String
        let queue: Shown
        let state: String
        let method: Shown
        let url: Shown
        let attempt: Int
        let maxAttempts: Int
        let time: String
        let timeISO: String?
        let lastStatus: Int?
        let lastError: Shown?
    }

    /// The list for `query`: `page` is nil when the filter could not be read, `scanWindow` is
    /// what a substring filter examines, `actions` whether actions are shown.
    init(_ query: JobListQuery, page: WebJobPage?, scanWindow: Int = 0, actions: Bool) {
        let dead = query.dead
        let path = dead ? "/dead" : "/jobs"
        let raw = query.raw
        action = path
        filter = FilterValues(
            queue: raw["queue"], state: raw["state"], host: raw["host"], url: raw["url"], error: raw["error"],
            since: raw["since"], until: raw["until"])
        showState = !dead
        showHost = !dead
        showError = dead
        states = [StateOption(value: "", label: "any", selected: raw["state"] == nil)]
            + JobState.allCases.map { StateOption(value: $0.rawValue, label: $0.rawValue, selected: raw["state"] == $0.rawValue) }
        sinceLabel = dead ? "Died" : "Created"
        heading = dead ? "Dead letters" : "Jobs"
        timeLabel = dead ? "Died" : "Created"
        rowActions = dead && actions
        guard let page else {
            hasJobs = false
            jobs = []
            back = nil
            nextPage = nil
            firstPage = nil
            searched = nil
            requeueAllLink = nil
            return
        }
        jobs = page.jobs.map { job in
            let time = dead ? (job.finishedAt ?? job.createdAt) : job.createdAt
            return Row(
                id: String(job.id), queue: .text(job.queue), state: job.state.rawValue, method: .text(job.method),
                url: .url(job.url), attempt: job.attempt, maxAttempts: job.maxAttempts, time: PageFormat.time(time),
                timeISO: PageFormat.isoTime(time), lastStatus: job.lastStatus,
                lastError: job.lastError.map { .message($0, limit: 160) })
        }
        hasJobs = !page.jobs.isEmpty || page.nextBefore != nil
        back = path + WebApp.queryString(query.linkPairs(before: query.before))
        nextPage = page.nextBefore.map { path + WebApp.queryString(query.linkPairs(before: $0)) }
        firstPage = query.before == nil ? nil : path + WebApp.queryString(query.linkPairs(before: nil))
        searched = page.searchedDownTo.map { lowest in
            "This page examined the \(scanWindow) newest jobs that pass the other filters "
                + "(down to job \(lowest)) and found \(page.jobs.count) that match; Older searches further."
        }
        requeueAllLink = dead && actions && !page.jobs.isEmpty
            ? "/dead/requeue" + WebApp.queryString(query.linkPairs(before: nil)) : nil
    }
}

/// `/jobs/<id>`: everything about one job. Header values and attempt errors go through
/// `Redaction.message` (a URL with credentials can hide in any text; the store already hid
/// secret headers' values), the body and response excerpts through `BodyRedaction`.
struct JobView {
    let id: String
    let state: String
    let queue: Shown
    let queueQuery: String
    let attempt: Int
    let maxAttempts: Int
    let priority: Int
    let created: String
    let runAt: String
    let method: Shown
    let url: Shown
    let canRequeue: Bool
    let finished: String?
    let lockedBy: Shown?
    let lockedUntil: String?
    let idempotencyKey: Shown?
    let lastError: Shown?
    let headers: [Header]
    let hasHeaders: Bool
    let body: Shown?
    let bodyBytes: Int?
    let bodyClipped: Bool
    let attempts: [Attempt]
    let hasAttempts: Bool
    let history: [HistoryItem]

    /// One request header.
    struct Header {
        let name: Shown
        let value: Shown
    }

    /// One attempt on the timeline.
    struct Attempt {
        let attempt: Int
        let started: String
        let startedISO: String?
        let duration: String
        let worker: Shown
        /// `ok` or `failed`, the item's class.
        let outcome: String
        let status: Int?
        let error: Shown?
        let response: Shown?
    }

    /// One line of the job's history.
    struct HistoryItem {
        let time: String
        let iso: String?
        let what: Shown

        init(_ time: StoredTime, _ what: Shown) {
            self.time = PageFormat.time(time)
            iso = PageFormat.isoTime(time)
            self.what = what
        }
    }

    init(_ job: JobDetail, actions: Bool) {
        let s = job.summary
        id = String(s.id)
        state = s.state.rawValue
        queue = .text(s.queue)
        queueQuery = FormData.encode(s.queue)
        attempt = s.attempt
        maxAttempts = s.maxAttempts
        priority = s.priority
        created = PageFormat.time(s.createdAt)
        runAt = PageFormat.time(s.runAt)
        method = .text(s.method)
        url = .url(s.url)
        canRequeue = actions && s.state == .dead
        finished = s.finishedAt.map(PageFormat.time)
        lockedBy = job.lockedBy.map(Shown.text)
        lockedUntil = job.lockedBy == nil ? nil : job.lockedUntil.map(PageFormat.time) ?? "-"
        idempotencyKey = job.idempotencyKey.map(Shown.text)
        lastError = s.lastError.map { .message($0) }
        headers = job.headers.map { Header(name: .text($0.0), value: .message($0.1)) }
        hasHeaders = !headers.isEmpty
        if let stored = job.body, !stored.isEmpty {
            let shown = Shown.body(stored)
            body = shown.shown
            bodyBytes = stored.count
            bodyClipped = shown.clipped
        } else {
            body = nil
            bodyBytes = nil
            bodyClipped = false
        }
        attempts = job.attempts.map { attempt in
            Attempt(
                attempt: attempt.attempt, started: PageFormat.time(attempt.startedAt),
                startedISO: PageFormat.isoTime(attempt.startedAt),
                duration: PageFormat.milliseconds(attempt.duration.seconds * 1000), worker: .text(attempt.worker),
                outcome: (attempt.status.map { (200..<300).contains($0) } ?? false) ? "ok" : "failed",
                status: attempt.status, error: attempt.error.map { .message($0) },
                response: attempt.responseExcerpt.flatMap { $0.isEmpty ? nil : Shown.body(Array($0.utf8), limit: 300).shown })
        }
        hasAttempts = !attempts.isEmpty
        history = Self.history(job)
    }

    /// The job's life as far as the tables tell it: created, each attempt and its outcome,
    /// then where it is now.
    static func history(_ job: JobDetail) -> [HistoryItem] {
        let s = job.summary
        var items = [HistoryItem(s.createdAt, "created in queue \(text: s.queue)")]
        for attempt in job.attempts {
            let outcome: Shown = attempt.status.map { "HTTP \($0)" } ?? "no answer"
            items.append(HistoryItem(
                attempt.startedAt,
                "attempt \(attempt.attempt): \(outcome) after \(text: PageFormat.milliseconds(attempt.duration.seconds * 1000))"))
        }
        switch s.state {
        case .succeeded, .dead, .cancelled:
            items.append(HistoryItem(s.finishedAt ?? job.updatedAt, "\(text: s.state.rawValue)"))
        case .pending, .retrying:
            items.append(HistoryItem(s.runAt, "\(text: s.state.rawValue): due at this time"))
        case .running:
            items.append(HistoryItem(job.updatedAt, "running on \(text: job.lockedBy ?? "a worker")"))
        }
        return items
    }
}

/// `/dead/requeue`: how many dead jobs match, and the form that requeues exactly those.
struct RequeueAllView {
    let count: Int
    let one: Bool
    let hasMatches: Bool
    /// The highest id counted: jobs that die after the count are left alone.
    let maxID: String
    let description: Shown
    /// The filter with its times fixed, as hidden fields (the operator's own input, sent back
    /// as given).
    let fields: [Field]
    let back: String

    /// One hidden field.
    struct Field {
        let name: String
        let value: String
    }

    init(_ query: JobListQuery, count: Int, maxID: Int64) {
        self.count = count
        one = count == 1
        hasMatches = count > 0
        self.maxID = String(maxID)
        description = .filterDescription(query)
        fields = query.formPairs.map { Field(name: $0.0, value: $0.1) }
        back = "/dead" + WebApp.queryString(query.linkPairs(before: nil))
    }
}

/// `/destinations`: per host its jobs, cap, breaker and whether it is disabled.
struct DestinationsView {
    let destinations: [Row]
    let hasDestinations: Bool

    /// One host.
    struct Row {
        let host: Shown
        /// The host's page (nil for a host no path carries).
        let path: String?
        let query: String
        let due: Int
        let later: Int
        let running: Int
        let cap: String
        let streak: Int
        let threshold: Int
        let breaker: Shown
        let disabled: Bool
        let disabledReason: Shown?
    }

    init(_ destinations: [DestinationInfo]) {
        self.destinations = destinations.map { d in
            Row(
                host: .text(d.host), path: ConsolePath.destination(d.host), query: FormData.encode(d.host), due: d.due, later: d.later, running: d.running,
                cap: d.maxInFlightIsDefault ? "\(d.maxInFlight) (default)" : "\(d.maxInFlight)",
                streak: d.failureStreak, threshold: d.breakerThreshold, breaker: .text(d.breaker),
                disabled: d.disabledAt != nil, disabledReason: d.disabledReason.map { "(\(message: $0))" })
        }
        hasDestinations = !destinations.isEmpty
    }
}
