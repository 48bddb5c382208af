//! The DOM side of the playground (wasm32 only): event delegation for every control, a
//! gloo-timers frame that drives the clock, rendering of the dynamic parts, and the functions the
//! page's small module script calls (import, export, vectors).

use std::cell::RefCell;
use std::rc::Rc;

use gloo_timers::callback::Interval;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{Document, Element, HtmlElement, HtmlInputElement, HtmlSelectElement};

use crate::app::{Action, Field, LogLine, Playground, GUIDES};
use crate::clock::Mode;
use crate::view;

/// Real ms between frames.
const FRAME_MS: u32 = 50;
/// Real ms between replayed steps when "play" is on.
const REPLAY_EVERY_MS: f64 = 700.0;
/// Log lines shown.
const LOG_LINES: usize = 300;
/// Keys the query view lists at most (one page).
const QUERY_KEYS: usize = 50;

struct Page {
    model: Playground,
    doc: Document,
    last_real: f64,
    /// What the client cards were last rendered from: key count and client ids (`None` forces a
    /// render, e.g. after a new session whose clients have the same ids but fresh fields).
    rendered_clients: Option<(usize, Vec<u32>)>,
    /// Length and last line of the log last rendered (the length alone repeats across sessions).
    rendered_log: Option<(usize, Option<LogLine>)>,
    rendered_storage: Option<usize>,
    /// The timeline HTML last written (a paused clock renders the same HTML every frame).
    rendered_timeline: String,
    /// The query view's HTML last written.
    rendered_query: String,
    /// The query view's prefix (as typed).
    query_prefix: String,
    replay_playing: bool,
    last_replay: f64,
}

thread_local! {
    static PAGE: RefCell<Option<Rc<RefCell<Page>>>> = const { RefCell::new(None) };
}

fn page() -> Option<Rc<RefCell<Page>>> {
    PAGE.with(|p| p.borrow().clone())
}

/// Runs `f` on the page unless it is already in use (an event dispatched from inside a handler).
fn with_page(f: impl FnOnce(&mut Page)) {
    if let Some(p) = page() {
        if let Ok(mut page) = p.try_borrow_mut() {
            f(&mut page);
        }
    }
}

fn real_now() -> f64 {
    web_sys::window()
        .and_then(|w| w.performance())
        .map_or(0.0, |p| p.now())
}

fn by_id(doc: &Document, id: &str) -> Option<Element> {
    doc.get_element_by_id(id)
}

fn set_text(doc: &Document, id: &str, text: &str) {
    if let Some(e) = by_id(doc, id) {
        if e.text_content().as_deref() != Some(text) {
            e.set_text_content(Some(text));
        }
    }
}

fn set_html(doc: &Document, id: &str, html: &str) {
    if let Some(e) = by_id(doc, id) {
        e.set_inner_html(html);
    }
}

/// Shows an error in plain words in the page (not only on the console).
fn show_error(doc: &Document, id: &str, message: &str) {
    set_text(doc, id, message);
    if let Some(e) = by_id(doc, id) {
        let _ = e
            .class_list()
            .toggle_with_force("visible", !message.is_empty());
    }
}

/// Calls `handle` with the page for every `event` on the document whose target is a `T`
/// (events on other elements are ignored). The listener lives as long as the page.
fn listen<T: JsCast>(
    doc: &Document,
    event: &str,
    handle: impl Fn(&mut Page, &T) + 'static,
) -> Result<(), JsValue> {
    let listener = Closure::<dyn FnMut(web_sys::Event)>::new(move |event: web_sys::Event| {
        if let Some(target) = event.target().and_then(|t| t.dyn_into::<T>().ok()) {
            with_page(|p| handle(p, &target));
        }
    });
    doc.add_event_listener_with_callback(event, listener.as_ref().unchecked_ref())?;
    listener.forget();
    Ok(())
}

/// Where the page remembers that the first-visit tour was dismissed.
const TOUR_KEY: &str = "expiring-lock-playground-tour";

/// The page's local storage, if the browser allows it.
fn local_storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok().flatten()
}

/// Starts the playground if the page has one (`#playground`).
#[wasm_bindgen(start)]
pub fn start() -> Result<(), JsValue> {
    let doc = web_sys::window()
        .and_then(|w| w.document())
        .ok_or("no document")?;
    if by_id(&doc, "playground").is_none() {
        return Ok(());
    }
    let state = Rc::new(RefCell::new(Page {
        model: Playground::new(),
        doc: doc.clone(),
        last_real: real_now(),
        rendered_clients: None,
        rendered_log: None,
        rendered_storage: None,
        rendered_timeline: String::new(),
        rendered_query: String::new(),
        query_prefix: String::new(),
        replay_playing: false,
        last_replay: 0.0,
    }));
    PAGE.with(|p| *p.borrow_mut() = Some(state));

    listen(&doc, "click", |p, target: &Element| {
        if let Ok(Some(button)) = target.closest("[data-action]") {
            p.on_action(&button);
        }
    })?;
    listen(&doc, "input", |p, input: &HtmlInputElement| {
        p.on_field(input)
    })?;
    listen(&doc, "change", |p, select: &HtmlSelectElement| {
        p.on_select(select);
    })?;
    Interval::new(FRAME_MS, || with_page(Page::frame)).forget();
    with_page(Page::open_link);
    with_page(Page::show_guides_and_tour);
    with_page(Page::render);
    Ok(())
}

impl Page {
    fn client_id(el: &Element) -> Option<u32> {
        el.get_attribute("data-client")?.parse().ok()
    }

    fn on_action(&mut self, el: &Element) {
        let Some(name) = el.get_attribute("data-action") else {
            return;
        };
        let now = real_now();
        match name.as_str() {
            "add-client" => {
                self.model.add_client();
            }
            "remove" => {
                if let Some(id) = Self::client_id(el) {
                    self.model.remove_client(id);
                }
            }
            "clock-toggle" => {
                let paused = self.model.clock.paused();
                self.model.clock.set_paused(!paused);
            }
            "clock-step" => {
                let ms = self.select_value("step-size").parse().unwrap_or(100);
                self.model.step(ms);
            }
            "export" => self.download(),
            "pan-back" => self.model.view.pan(true, self.model.clock.now()),
            "pan-forward" => self.model.view.pan(false, self.model.clock.now()),
            "follow-now" => self.model.view.follow(),
            "zoom-in" => self.model.view.zoom_in(),
            "zoom-out" => self.model.view.zoom_out(),
            "tour-dismiss" => {
                if let Some(storage) = local_storage() {
                    let _ = storage.set_item(TOUR_KEY, "dismissed");
                }
                if let Some(tour) = by_id(&self.doc, "tour") {
                    let _ = tour.set_attribute("hidden", "");
                }
            }
            "share" => self.share(),
            "replay-next" => {
                self.replay_playing = false;
                self.model.replay_step();
                self.rendered_clients = None; // the cards show the replayed step's fields
            }
            "replay-play" => {
                self.replay_playing = !self.replay_playing;
                self.last_replay = 0.0;
            }
            "reset" => {
                self.model = Playground::new();
                self.rendered_clients = None;
                self.replay_playing = false;
                show_error(&self.doc, "import-error", "");
            }
            action => {
                if let (Some(action), Some(id)) = (Action::from_name(action), Self::client_id(el)) {
                    if let Err(e) = self.model.act(id, action) {
                        self.show_field_error(e.client, e.field, &e.message);
                    }
                }
            }
        }
        self.last_real = now;
        self.render();
    }

    fn on_field(&mut self, input: &HtmlInputElement) {
        if input.id() == "query-prefix" {
            self.query_prefix = input.value();
            self.render();
            return;
        }
        let (Some(id), Some(field)) = (
            Self::client_id(input),
            input
                .get_attribute("data-field")
                .as_deref()
                .and_then(Field::from_name),
        ) else {
            return;
        };
        // Read the text as JS has it: a lone surrogate would become U+FFFD in a Rust String.
        let raw = js_sys::Reflect::get(input, &"value".into())
            .ok()
            .and_then(|v| v.dyn_into::<js_sys::JsString>().ok());
        let text = raw
            .filter(js_sys::JsString::is_valid_utf16)
            .map(String::from);
        let message = match self.model.set_field(id, field, text.as_deref()) {
            Ok(()) => String::new(),
            Err(e) => e.message,
        };
        self.show_field_error(id, field, &message);
    }

    fn show_field_error(&self, id: u32, field: Field, message: &str) {
        if let Some(c) = self.model.client(id) {
            if let Some(e) = by_id(&self.doc, &format!("kind-{id}")) {
                e.set_inner_html(&view::kind_summary(c));
            }
        }
        set_text(&self.doc, &format!("error-{id}-{}", field.name()), message);
        if let Ok(Some(input)) = self.doc.query_selector(&format!(
            "[data-client=\"{id}\"][data-field=\"{}\"]",
            field.name()
        )) {
            let _ = input.set_attribute(
                "aria-invalid",
                if message.is_empty() { "false" } else { "true" },
            );
        }
    }

    fn select_value(&self, id: &str) -> String {
        by_id(&self.doc, id)
            .and_then(|e| e.dyn_into::<HtmlSelectElement>().ok())
            .map(|s| s.value())
            .unwrap_or_default()
    }

    fn on_select(&mut self, select: &HtmlSelectElement) {
        let value = select.value();
        if let (Some(id), Some(field)) = (
            Self::client_id(select),
            (select.get_attribute("data-field").as_deref()).and_then(Field::from_name),
        ) {
            let message = match self.model.set_field(id, field, Some(&value)) {
                Ok(()) => String::new(),
                Err(e) => e.message,
            };
            self.show_field_error(id, field, &message);
            self.render();
            return;
        }
        match select.id().as_str() {
            "clock-mode" => {
                let mode = if value == "real" {
                    Mode::Real
                } else {
                    Mode::Virtual
                };
                self.model.clock.set_mode(mode, real_now());
            }
            "clock-speed" => {
                if let Ok(speed) = value.parse::<f64>() {
                    self.model.clock.set_speed(speed);
                }
            }
            "guide-select" => {
                if let Ok(i) = value.parse::<usize>() {
                    if self.import("guided scenarios", GUIDES).is_ok() {
                        if let Err(e) = self.model.choose_scenario(i) {
                            show_error(&self.doc, "import-error", &e);
                        }
                        if let Some(select) = by_id(&self.doc, "scenario-select")
                            .and_then(|e| e.dyn_into::<HtmlSelectElement>().ok())
                        {
                            select.set_value(&value);
                        }
                    }
                    self.rendered_clients = None;
                    self.replay_playing = false;
                }
            }
            "scenario-select" => {
                if let Ok(i) = value.parse::<usize>() {
                    if let Err(e) = self.model.choose_scenario(i) {
                        show_error(&self.doc, "import-error", &e);
                    }
                    self.rendered_clients = None;
                    self.replay_playing = false;
                }
            }
            _ => return,
        }
        self.render();
    }

    fn frame(&mut self) {
        let now = real_now();
        let elapsed = now - self.last_real;
        self.last_real = now;
        self.model.tick(now, elapsed);
        if self.replay_playing && now - self.last_replay >= REPLAY_EVERY_MS {
            self.last_replay = now;
            if self.model.replay_step().is_none() {
                self.replay_playing = false;
            }
            self.rendered_clients = None; // the cards show the replayed step's fields
        }
        self.render();
    }

    fn render(&mut self) {
        let doc = self.doc.clone();
        let clock = &self.model.clock;
        set_text(&doc, "clock-now", &crate::app::secs(clock.now()));
        let state = match (clock.mode(), clock.paused()) {
            (Mode::Real, _) => "real time".to_owned(),
            (Mode::Virtual, true) => format!("virtual, paused (x{})", clock.speed()),
            (Mode::Virtual, false) => format!("virtual, running at x{}", clock.speed()),
        };
        set_text(&doc, "clock-state", &state);
        set_text(
            &doc,
            "clock-toggle",
            if clock.paused() { "Run" } else { "Pause" },
        );
        let virtual_clock = clock.mode() == Mode::Virtual;
        for id in ["clock-toggle", "clock-step", "clock-speed", "step-size"] {
            if let Some(e) = by_id(&doc, id) {
                let _ = if virtual_clock {
                    e.remove_attribute("disabled")
                } else {
                    e.set_attribute("disabled", "")
                };
            }
        }
        let next = self.model.next_wakeup().map_or_else(
            || "nothing pending".to_owned(),
            |t| format!("next wake-up at {}", crate::app::secs(t)),
        );
        set_text(&doc, "clock-next", &next);

        let ids: Vec<u32> = self.model.clients.iter().map(|c| c.id).collect();
        let signature = (self.model.keys.len(), ids);
        if self.rendered_clients.as_ref() != Some(&signature) {
            set_html(&doc, "clients-list", &view::clients(&self.model));
            set_html(&doc, "key-list", &view::key_options(&self.model));
            self.rendered_clients = Some(signature);
        }
        let infos = view::key_infos(&mut self.model);
        let now = self.model.clock.now();
        for c in &self.model.clients {
            set_text(
                &doc,
                &format!("status-{}", c.id),
                &view::client_status(c, &infos, now),
            );
        }
        set_text(&doc, "timeline-window", &view::timeline_window(&self.model));
        let timeline = view::timeline(&self.model, &infos);
        if timeline != self.rendered_timeline {
            set_html(&doc, "timeline-body", &timeline);
            self.rendered_timeline = timeline;
        }
        let log = Some((self.model.log.len(), self.model.log.last().cloned()));
        if self.rendered_log != log {
            set_html(&doc, "log-body", &view::log(&self.model, LOG_LINES));
            self.rendered_log = log;
        }
        let writes = Some(self.model.storage.writes.len());
        if self.rendered_storage != writes {
            set_html(&doc, "storage-body", &view::storage(&self.model, LOG_LINES));
            self.rendered_storage = writes;
        }
        let query = view::query(&mut self.model, &self.query_prefix, QUERY_KEYS);
        if query != self.rendered_query {
            set_html(&doc, "query-body", &query);
            self.rendered_query = query;
        }
        set_text(
            &doc,
            "export-count",
            &format!("{} steps recorded", self.model.recorded_steps()),
        );
        match &self.model.replay {
            Some(r) => {
                set_text(&doc, "replay-status", &r.describe());
                if let Some(e) = by_id(&doc, "replay") {
                    let _ = e.set_attribute(
                        "data-state",
                        if r.finished() { "finished" } else { "loaded" },
                    );
                    let _ = e.set_attribute("data-failed", &r.failed.to_string());
                }
                set_text(
                    &doc,
                    "replay-play",
                    if self.replay_playing { "Stop" } else { "Play" },
                );
            }
            None => set_text(&doc, "replay-status", "No scenario imported."),
        }
    }

    /// Fills the guided-scenario list, and shows the first-visit tour unless it was dismissed.
    fn show_guides_and_tour(&mut self) {
        let options: String = Playground::guide_names()
            .iter()
            .enumerate()
            .map(|(i, n)| format!("<option value=\"{i}\">{}</option>", view::esc(n)))
            .collect();
        if let Some(select) = by_id(&self.doc, "guide-select") {
            let _ = select.insert_adjacent_html("beforeend", &options);
        }
        let dismissed = local_storage()
            .and_then(|s| s.get_item(TOUR_KEY).ok().flatten())
            .is_some();
        if !dismissed {
            if let Some(tour) = by_id(&self.doc, "tour") {
                let _ = tour.remove_attribute("hidden");
            }
        }
    }

    /// Opens the scenario a shared link carries (`#s=...`), if any, for replay.
    fn open_link(&mut self) {
        let Some(hash) = web_sys::window().and_then(|w| w.location().hash().ok()) else {
            return;
        };
        let fragment = hash.strip_prefix('#').unwrap_or(&hash);
        if fragment.is_empty() {
            return;
        }
        match self.model.open_fragment(fragment) {
            Ok(()) => self.rendered_clients = None,
            Err(e) => show_error(&self.doc, "import-error", &e),
        }
    }

    /// Puts this session's scenario in the address (no reload, no history entry) and shows the
    /// link to copy.
    fn share(&self) {
        let fragment = self.model.share_fragment();
        let Some(window) = web_sys::window() else {
            return;
        };
        let shown = (|| -> Result<String, JsValue> {
            window.history()?.replace_state_with_url(
                &JsValue::NULL,
                "",
                Some(&format!("#{fragment}")),
            )?;
            window.location().href()
        })();
        match shown {
            Ok(url) => {
                if let Some(input) = by_id(&self.doc, "share-link")
                    .and_then(|e| e.dyn_into::<HtmlInputElement>().ok())
                {
                    input.set_value(&url);
                    input.set_hidden(false);
                    input.select();
                }
            }
            Err(_) => show_error(&self.doc, "import-error", "the browser refused the link"),
        }
    }

    fn download(&self) {
        let text = self.model.export();
        let result = (|| -> Result<(), JsValue> {
            let parts = js_sys::Array::of1(&JsValue::from_str(&text));
            let options = web_sys::BlobPropertyBag::new();
            options.set_type("application/json");
            let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options)?;
            let url = web_sys::Url::create_object_url_with_blob(&blob)?;
            let a: HtmlElement = self.doc.create_element("a")?.dyn_into()?;
            a.set_attribute("href", &url)?;
            a.set_attribute("download", "playground-scenario.json")?;
            a.click();
            web_sys::Url::revoke_object_url(&url)?;
            Ok(())
        })();
        if result.is_err() {
            show_error(
                &self.doc,
                "import-error",
                "the browser refused the download",
            );
        }
    }

    fn import(&mut self, label: &str, text: &str) -> Result<(), String> {
        self.replay_playing = false;
        let result = self.model.import(label, text);
        self.rendered_clients = None;
        match &result {
            Ok(()) => {
                show_error(&self.doc, "import-error", "");
                if let Some(r) = &self.model.replay {
                    let options: String = r
                        .scenario_names()
                        .iter()
                        .enumerate()
                        .map(|(i, n)| format!("<option value=\"{i}\">{}</option>", view::esc(n)))
                        .collect();
                    set_html(&self.doc, "scenario-select", &options);
                    if let Some(e) = by_id(&self.doc, "scenario-select") {
                        let _ = e.remove_attribute("hidden");
                    }
                }
            }
            Err(e) => show_error(&self.doc, "import-error", &format!("not imported: {e}")),
        }
        self.render();
        result
    }
}

/// Imports a vector file's text for step-by-step replay (called by the page's file input).
///
/// # Errors
/// Why the file was refused, in plain words (also shown in the page).
#[wasm_bindgen(js_name = importScenario)]
pub fn import_scenario(label: &str, text: &str) -> Result<(), JsValue> {
    let p = page().ok_or("the playground is not running")?;
    let mut page = p.try_borrow_mut().map_err(|_| "the playground is busy")?;
    page.import(label, text).map_err(|e| JsValue::from_str(&e))
}

/// The session so far as a vector file (what the export button downloads).
#[wasm_bindgen(js_name = exportScenario)]
pub fn export_scenario() -> String {
    page()
        .map(|p| p.borrow().model.export())
        .unwrap_or_default()
}

/// Runs vector files given as parallel lists of names and texts; returns the JSON report.
#[wasm_bindgen(js_name = runVectors)]
pub fn run_vectors_js(names: Vec<String>, texts: Vec<String>) -> String {
    let files: Vec<(String, String)> = names.into_iter().zip(texts).collect();
    crate::run_vectors(&files)
}
