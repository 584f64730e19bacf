// The page's chrome in the reader's language. One message table per language (messages-*.ts); the
// language is the stored choice, else the browser's, else English; a switch re-words the page at
// once. Every localised node carries its message (data-i18n for the text, data-i18n-<attribute>
// for an attribute: the key, or {"key", "args"} as JSON), so a switch re-formats them all in place,
// those the page built since it loaded included, without re-rendering or a reload.
// What the service wrote (answers, titles, its error texts) is shown as it is, never translated.
import { en } from "./messages-en.js";
import { ro } from "./messages-ro.js";
/** The shipped languages by ISO 639-1 code. Another language is one table and one entry here. */
const TABLES = { en, ro };
export const LOCALES = Object.keys(TABLES);
const FALLBACK = "en";
/** localStorage: the language the reader chose with the switch (kept across reloads and tabs). */
const STORED = "rag.locale";
const ATTRIBUTES = ["aria-label", "placeholder", "title"];
let current = FALLBACK;
export function text(key, args) {
    return args === undefined ? { key } : { key, args };
}
/** Text the page shows as it is (a server's error, a file's reason), where a message is expected. */
export function verbatim(value) {
    return { key: "verbatim", args: { text: value } };
}
/** An error the page words itself: shown in the reader's language (its ``message`` is the English). */
export class LocalisedError extends Error {
    constructor(text) {
        super(format(text, "en"));
        this.text = text;
    }
}
export function isLocale(value) {
    return value !== null && LOCALES.includes(value);
}
/** The stored choice if it is shipped, else the first of the browser's languages (``navigator.languages``)
 * whose primary subtag is shipped ("ro-RO" → ro), else English. */
export function initialLocale(stored, preferred) {
    if (isLocale(stored))
        return stored;
    for (const tag of preferred) {
        const primary = tag.split("-")[0]?.toLowerCase() ?? "";
        if (isLocale(primary))
            return primary;
    }
    return FALLBACK;
}
export function currentLocale() {
    return current;
}
function pluralForm(message, locale, count) {
    if (typeof count !== "number")
        return message.other;
    const category = new Intl.PluralRules(locale).select(count);
    const form = category === "one" || category === "few" || category === "many" ? message[category] : undefined;
    return form ?? message.other;
}
/** The message in ``locale`` (the page's language by default) with its arguments filled in. */
export function format(what, locale = current) {
    const { key, args = {} } = typeof what === "string" ? { key: what } : what;
    const message = TABLES[locale][key];
    const pattern = typeof message === "string" ? message : pluralForm(message, locale, args["count"]);
    return pattern.replace(/\{(\w+)\}/g, (whole, name) => {
        const value = args[name];
        if (value === undefined)
            return whole;
        if (typeof value === "number")
            return value.toLocaleString(locale);
        return typeof value === "string" ? value : format(value, locale);
    });
}
function marker(attribute) {
    return attribute === null ? "data-i18n" : `data-i18n-${attribute}`;
}
function write(node, attribute, value) {
    if (attribute === null)
        node.textContent = value;
    else
        node.setAttribute(attribute, value);
}
/** Shows ``what`` as the node's text (or as ``attribute``) and keeps it for later switches; null
 * clears it. Only for nodes whose whole text is the message: the text replaces their children. */
export function localise(node, what, attribute = null) {
    if (what === null) {
        node.removeAttribute(marker(attribute));
        if (attribute === null)
            node.textContent = "";
        else
            node.removeAttribute(attribute);
        return;
    }
    node.setAttribute(marker(attribute), typeof what === "string" ? what : JSON.stringify(what));
    write(node, attribute, format(what));
}
/** What a marker holds; null (logged, the node keeps its text) for a key no table has, e.g. a typo in index.html. */
function parse(value) {
    const parsed = (value.startsWith("{") ? JSON.parse(value) : { key: value });
    if (!Object.prototype.hasOwnProperty.call(en, parsed.key)) {
        console.error(`no message "${parsed.key}" in the message tables`);
        return null;
    }
    return parsed;
}
/** Re-words every marked node under ``root`` in the page's language. */
export function translate(root = document) {
    for (const attribute of [null, ...ATTRIBUTES]) {
        const name = marker(attribute);
        for (const node of Array.from(root.querySelectorAll(`[${name}]`))) {
            const what = parse(node.getAttribute(name) ?? "");
            if (what !== null)
                write(node, attribute, format(what));
        }
    }
}
function stored() {
    try {
        return localStorage.getItem(STORED);
    }
    catch {
        return null; // storage refused (privacy settings): the browser's language, every time
    }
}
/** The page in ``locale`` at once: ``<html lang>`` and every marked node (the ``<title>`` among
 * them); ``remember`` keeps the choice for the next visits. */
export function setLocale(locale, remember) {
    current = locale;
    document.documentElement.lang = locale;
    translate();
    if (!remember)
        return;
    try {
        localStorage.setItem(STORED, locale);
    }
    catch {
        // not kept: this visit stays in the chosen language all the same
    }
}
/** The language the page opens in, applied; and the switch (a select) offering every shipped
 * language by its own name, changing the page at once and remembering the choice. */
export function startLocale(select) {
    setLocale(initialLocale(stored(), navigator.languages ?? [navigator.language]), false);
    select.replaceChildren(...LOCALES.map((code) => {
        const option = document.createElement("option");
        option.value = code;
        option.lang = code;
        option.textContent = format("languageName", code);
        return option;
    }));
    select.value = current;
    select.addEventListener("change", () => {
        if (isLocale(select.value))
            setLocale(select.value, true);
    });
}
