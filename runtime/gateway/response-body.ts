// A workflow-produced body in the trigger's response.contentType: the value is rendered
// in that format, never JSON text under another label. docs/resources.md ("Response
// bodies") states the rules; test/gateway/response-body.test.ts holds them.
//
//   JSON   application/json, */*+json      JSON text (a string too: a JSON string)
//   XML    application/xml, text/xml, +xml  a string as-is (the workflow wrote XML);
//                                           anything else an XML document, root <response>
//   HTML   text/html                        a string as-is; anything else an escaped
//                                           fragment: objects <dl>, arrays <ol>
//   text   any other text/*                 a string as-is; objects `key: value` lines,
//                                           arrays `- item` lines, nesting indented
//   other  any other type                   a string as-is; anything else JSON text
import { setOwn } from '../own-property.ts';
import { XMLBuilder } from 'fast-xml-parser';

export type BodyFormat = 'json' | 'xml' | 'html' | 'text' | 'other';

/** The format a content type selects (its parameters, e.g. charset, do not matter). */
export function bodyFormatOf(contentType: string): BodyFormat {
  const type = (contentType.split(';')[0] ?? '').trim().toLowerCase();
  if (type === 'application/json' || type.endsWith('+json')) return 'json';
  if (type === 'application/xml' || type === 'text/xml' || type.endsWith('+xml')) return 'xml';
  if (type === 'text/html') return 'html';
  if (type.startsWith('text/')) return 'text';
  return 'other';
}

/** The body text of `value` in the format `contentType` selects. */
export function renderBody(contentType: string, value: unknown): string {
  const format = bodyFormatOf(contentType);
  if (format === 'json') return JSON.stringify(value ?? null);
  if (typeof value === 'string') return value;
  switch (format) {
    case 'xml':
      return toXml(value);
    case 'html':
      return toHtml(value);
    case 'text':
      return toText(value);
    default:
      return JSON.stringify(value ?? null);
  }
}

/** A number, boolean or string as text (JSON text for anything else that gets here). */
function scalarString(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint')
    return value.toString();
  return JSON.stringify(value) ?? '';
}

// ---- XML ----------------------------------------------------------------------------

/** The root element of an XML body built from a value. */
export const XML_ROOT = 'response';
/** The element of an array item that has no property name (top level, nested arrays). */
export const XML_ITEM = 'item';

const builder = new XMLBuilder({ format: false, suppressEmptyNode: true });

// XML 1.0 (fifth edition) name characters, without the colon (no namespace prefixes),
// as UTF-16 code unit ranges.
const NAME_START: [number, number][] = [
  [0x41, 0x5a],
  [0x5f, 0x5f],
  [0x61, 0x7a],
  [0xc0, 0xd6],
  [0xd8, 0xf6],
  [0xf8, 0x2ff],
  [0x370, 0x37d],
  [0x37f, 0x1fff],
  [0x200c, 0x200d],
  [0x2070, 0x218f],
  [0x2c00, 0x2fef],
  [0x3001, 0xd7ff],
  [0xf900, 0xfdcf],
  [0xfdf0, 0xfffd],
];
const NAME_CHAR: [number, number][] = [
  ...NAME_START,
  [0x2d, 0x2e],
  [0x30, 0x39],
  [0xb7, 0xb7],
  [0x300, 0x36f],
  [0x203f, 0x2040],
];
const within = (ranges: [number, number][], code: number) =>
  ranges.some(([from, to]) => code >= from && code <= to);

/**
 * A property name as an XML element name: each character a name cannot hold becomes
 * `_xHHHH_` (its UTF-16 code unit in hex, as .NET's XmlConvert.EncodeName does), and so
 * does a `_` that starts such a sequence, so the mapping can be undone. The empty name
 * becomes `_x0000_`.
 */
export function xmlName(name: string): string {
  if (name === '') return '_x0000_';
  let out = '';
  for (let i = 0; i < name.length; i++) {
    const c = name.charAt(i);
    const valid = within(i === 0 ? NAME_START : NAME_CHAR, name.charCodeAt(i));
    const escapesUnderscore = c === '_' && /^_x[0-9A-Fa-f]{4}_/.test(name.slice(i));
    out +=
      valid && !escapesUnderscore
        ? c
        : `_x${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}_`;
  }
  return out;
}

/** Characters XML 1.0 cannot carry at all (not even as references) become U+FFFD. */
function xmlText(text: string): string {
  return text.replace(
    // eslint-disable-next-line no-control-regex -- these are the characters XML refuses
    /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g,
    '\uFFFD',
  );
}

type XmlNode = string | XmlNode[] | { [element: string]: XmlNode };

/** A value as fast-xml-parser's builder tree: objects' keys escaped, arrays repeated. */
function xmlTree(value: unknown): XmlNode {
  if (value === null || value === undefined) return '';
  // An array with no property name of its own (the top level, an item of an array).
  if (Array.isArray(value)) return { [XML_ITEM]: value.map(xmlTree) };
  if (typeof value === 'object') {
    const tree: Record<string, XmlNode> = {};
    for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
      // An array property repeats its element, one per item.
      setOwn(tree, xmlName(key), Array.isArray(v) ? v.map(xmlTree) : xmlTree(v));
    }
    return tree;
  }
  return xmlText(scalarString(value));
}

function toXml(value: unknown): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n${builder.build({ [XML_ROOT]: xmlTree(value) })}`;
}

// ---- HTML ---------------------------------------------------------------------------

const HTML_ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c] ?? c);
}

function toHtml(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (Array.isArray(value)) return `<ol>${value.map((v) => `<li>${toHtml(v)}</li>`).join('')}</ol>`;
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    return `<dl>${entries.map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${toHtml(v)}</dd>`).join('')}</dl>`;
  }
  return escapeHtml(scalarString(value));
}

// ---- text ---------------------------------------------------------------------------

function isContainer(value: unknown): value is object {
  return typeof value === 'object' && value !== null;
}

/** A scalar on one line; continuation lines of a multi-line string keep the indent. */
function scalarText(value: unknown, indent: string): string {
  if (value === null || value === undefined) return '';
  return scalarString(value).replace(/\r?\n/g, `\n${indent}  `);
}

function textLines(value: unknown, indent: string): string[] {
  const lines: string[] = [];
  const entries: [string, unknown][] = Array.isArray(value)
    ? value.map((v) => ['-', v])
    : Object.entries(value as Record<string, unknown>).map(([k, v]) => [`${k}:`, v]);
  for (const [label, v] of entries) {
    if (isContainer(v)) {
      lines.push(`${indent}${label}`, ...textLines(v, `${indent}  `));
    } else {
      const text = scalarText(v, indent);
      lines.push(text === '' ? `${indent}${label}` : `${indent}${label} ${text}`);
    }
  }
  return lines;
}

function toText(value: unknown): string {
  if (!isContainer(value)) return scalarText(value, '');
  const lines = textLines(value, '');
  return lines.length > 0 ? `${lines.join('\n')}\n` : '';
}
