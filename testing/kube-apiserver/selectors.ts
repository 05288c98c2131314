// Label selectors and field selectors (K18), parsed as the API server parses the
// `labelSelector` and `fieldSelector` query parameters: metav1's
// Convert_string_To_labels_Selector / Convert_string_To_fields_Selector call
// k8s.io/apimachinery/pkg/labels/selector.go `Parse` and pkg/fields/selector.go
// `ParseSelector`, and handlers/get.go answers their error as 400 BadRequest with the
// error's text as the message (`errors.NewBadRequest(err.Error())` after
// `ParameterCodec.DecodeParameters`). Field labels a resource does not support are
// refused afterwards, also 400 (`opts.FieldSelector.Transform(ConvertFieldLabel)`).
// Ported from apimachinery v0.35.0 (this file's own code; no Go is run).
import { labelValueErrors, qualifiedNameErrors } from './object-meta.ts';
import { badRequest } from './status.ts';
import type { KubeObject } from './resources.ts';

export type Selector = (obj: KubeObject) => boolean;

// ------------------------------------------------------------------ labels.Parse

/** selection.Operator values, as the requirement and its error messages spell them. */
type Operator = '!' | '=' | '==' | 'in' | '!=' | 'notin' | 'exists' | 'gt' | 'lt';

/** labels.Token; 'id' is IdentifierToken, 'eos' EndOfStringToken. */
type Token =
  'error' | 'eos' | ')' | ',' | '!' | '==' | '=' | '>' | 'id' | 'in' | '<' | '!=' | 'notin' | '(';

/** string2token: every literal token (not identifiers, end of string or errors). */
const STRING_TO_TOKEN: Record<string, Token> = {
  ')': ')',
  ',': ',',
  '!': '!',
  '==': '==',
  '=': '=',
  '>': '>',
  in: 'in',
  '<': '<',
  '!=': '!=',
  notin: 'notin',
  '(': '(',
};

/** selector.go binaryOperators, for "found 'x', expected: …". */
const BINARY_OPERATORS = ['in', 'notin', '=', '==', '!=', 'gt', 'lt'];

interface Scanned {
  tok: Token;
  literal: string;
}

const isWhitespace = (ch: string): boolean =>
  ch === ' ' || ch === '\t' || ch === '\r' || ch === '\n';
const isSpecialSymbol = (ch: string): boolean => '=!(),><'.includes(ch) && ch !== '';

/** selector.go Lexer: identifiers and keywords, greedy operators. */
class Lexer {
  private pos = 0;
  private readonly s: string;
  constructor(s: string) {
    this.s = s;
  }

  private read(): string {
    return this.pos < this.s.length ? (this.s[this.pos++] ?? '') : '';
  }

  private unread(): void {
    this.pos--;
  }

  private scanIdOrKeyword(): Scanned {
    let buffer = '';
    for (;;) {
      const ch = this.read();
      if (ch === '') break;
      if (isSpecialSymbol(ch) || isWhitespace(ch)) {
        this.unread();
        break;
      }
      buffer += ch;
    }
    const tok = STRING_TO_TOKEN[buffer];
    return tok ? { tok, literal: buffer } : { tok: 'id', literal: buffer };
  }

  private scanSpecialSymbol(): Scanned {
    let last: Scanned | undefined;
    let buffer = '';
    for (;;) {
      const ch = this.read();
      if (ch === '') break;
      if (!isSpecialSymbol(ch)) {
        this.unread();
        break;
      }
      buffer += ch;
      const tok = STRING_TO_TOKEN[buffer];
      if (tok) last = { tok, literal: buffer };
      else if (last) {
        this.unread();
        break;
      }
    }
    return last ?? { tok: 'error', literal: `error expected: keyword found '${buffer}'` };
  }

  lex(): Scanned {
    let ch = this.read();
    while (isWhitespace(ch)) ch = this.read();
    if (ch === '') return { tok: 'eos', literal: '' };
    this.unread();
    return isSpecialSymbol(ch) ? this.scanSpecialSymbol() : this.scanIdOrKeyword();
  }
}

/** A parse failure; its message is the API server's error text. */
class ParseError extends Error {}

/** field.Invalid(path, value, detail).Error(): `<path>: Invalid value: "<v>": <detail>`. */
const invalidText = (path: string, value: string, detail: string): string =>
  `${path}: Invalid value: ${JSON.stringify(value)}: ${detail}`;

interface Requirement {
  key: string;
  op: Operator;
  values: string[];
}

/** strconv.ParseInt(s, 10, 64), undefined on error. */
function parseInt64(s: string): bigint | undefined {
  if (!/^[+-]?[0-9]+$/.test(s)) return undefined;
  const n = BigInt(s);
  return n >= -(2n ** 63n) && n < 2n ** 63n ? n : undefined;
}

/**
 * labels.NewRequirement's checks, with the parser's nil field path (so `key`, `values`);
 * the errors aggregated as field.ErrorList.ToAggregate words them (deduplicated,
 * `[a, b]` for more than one).
 */
function newRequirement(key: string, op: Operator, values: string[]): Requirement {
  const errs: string[] = [];
  const keyErrs = qualifiedNameErrors(key);
  if (keyErrs.length > 0) errs.push(invalidText('key', key, keyErrs.join('; ')));
  const json = JSON.stringify(values);
  if ((op === 'in' || op === 'notin') && values.length === 0)
    errs.push(
      `values: Invalid value: ${json}: for 'in', 'notin' operators, values set can't be empty`,
    );
  if ((op === '=' || op === '==' || op === '!=') && values.length !== 1)
    errs.push(
      `values: Invalid value: ${json}: exact-match compatibility requires one single value`,
    );
  if ((op === 'exists' || op === '!') && values.length !== 0)
    errs.push(
      `values: Invalid value: ${json}: values set must be empty for exists and does not exist`,
    );
  if (op === 'gt' || op === 'lt') {
    if (values.length !== 1)
      errs.push(
        `values: Invalid value: ${json}: for 'Gt', 'Lt' operators, exactly one value is required`,
      );
    values.forEach((v, i) => {
      if (parseInt64(v) === undefined)
        errs.push(
          invalidText(`values[${i}]`, v, "for 'Gt', 'Lt' operators, the value must be an integer"),
        );
    });
  }
  values.forEach((v, i) => {
    const valueErrs = labelValueErrors(v);
    if (valueErrs.length > 0)
      errs.push(invalidText(`values[${i}][${key}]`, v, valueErrs.join('; ')));
  });
  const unique = [...new Set(errs)];
  if (unique.length === 1) throw new ParseError(unique[0]);
  if (unique.length > 1) throw new ParseError(`[${unique.join(', ')}]`);
  return { key, op, values };
}

type Context = 'keyAndOperator' | 'values';

/** selector.go Parser: a recursive descent over the scanned tokens. */
class Parser {
  private readonly items: Scanned[] = [];
  private position = 0;

  constructor(selector: string) {
    const lexer = new Lexer(selector);
    for (;;) {
      const item = lexer.lex();
      this.items.push(item);
      if (item.tok === 'eos') break;
    }
  }

  /** In the values context `in` and `notin` are identifiers (`x in (in)`). */
  private at(index: number, context: Context): Scanned {
    const item = this.items[index] ?? { tok: 'eos', literal: '' };
    if (context === 'values' && (item.tok === 'in' || item.tok === 'notin'))
      return { tok: 'id', literal: item.literal };
    return item;
  }

  private lookahead(context: Context): Scanned {
    return this.at(this.position, context);
  }

  private consume(context: Context): Scanned {
    return this.at(this.position++, context);
  }

  parse(): Requirement[] {
    const requirements: Requirement[] = [];
    for (;;) {
      const { tok, literal } = this.lookahead('values');
      if (tok === 'eos') return requirements;
      if (tok !== 'id' && tok !== '!')
        throw new ParseError(`found '${literal}', expected: !, identifier, or 'end of string'`);
      try {
        requirements.push(this.parseRequirement());
      } catch (e) {
        if (e instanceof ParseError)
          throw new ParseError(`unable to parse requirement: ${e.message}`);
        throw e;
      }
      const next = this.consume('values');
      if (next.tok === 'eos') return requirements;
      if (next.tok !== ',')
        throw new ParseError(`found '${next.literal}', expected: ',' or 'end of string'`);
      const after = this.lookahead('values');
      if (after.tok !== 'id' && after.tok !== '!')
        throw new ParseError(`found '${after.literal}', expected: identifier after ','`);
    }
  }

  private parseRequirement(): Requirement {
    const { key, op: inferred } = this.parseKeyAndInferOperator();
    if (inferred === 'exists' || inferred === '!') return newRequirement(key, inferred, []);
    const op = this.parseOperator();
    const values = op === 'in' || op === 'notin' ? this.parseValues() : this.parseExactValue();
    // sets.String.List(): sorted, without duplicates.
    return newRequirement(key, op, [...new Set(values)].sort());
  }

  private parseKeyAndInferOperator(): { key: string; op?: Operator } {
    let op: Operator | undefined;
    let item = this.consume('values');
    if (item.tok === '!') {
      op = '!';
      item = this.consume('values');
    }
    if (item.tok !== 'id') throw new ParseError(`found '${item.literal}', expected: identifier`);
    const keyErrs = qualifiedNameErrors(item.literal);
    // validateLabelKey with the parser's nil *field.Path, which prints as "<nil>".
    if (keyErrs.length > 0)
      throw new ParseError(invalidText('<nil>', item.literal, keyErrs.join('; ')));
    const next = this.lookahead('values').tok;
    if ((next === 'eos' || next === ',') && op !== '!') op = 'exists';
    return op ? { key: item.literal, op } : { key: item.literal };
  }

  private parseOperator(): Operator {
    const { tok, literal } = this.consume('keyAndOperator');
    const ops: Partial<Record<Token, Operator>> = {
      in: 'in',
      '=': '=',
      '==': '==',
      '>': 'gt',
      '<': 'lt',
      notin: 'notin',
      '!=': '!=',
    };
    const op = ops[tok];
    if (!op) throw new ParseError(`found '${literal}', expected: ${BINARY_OPERATORS.join(', ')}`);
    return op;
  }

  /** `(a,b)`; `()` is the set of the empty string, as are empty members (`(,a)`). */
  private parseValues(): string[] {
    const open = this.consume('values');
    if (open.tok !== '(') throw new ParseError(`found '${open.literal}' expected: '('`);
    const { tok, literal } = this.lookahead('values');
    if (tok === ')') {
      this.consume('values');
      return [''];
    }
    if (tok !== 'id' && tok !== ',')
      throw new ParseError(`found '${literal}', expected: ',', ')' or identifier`);
    const values = this.parseIdentifiersList();
    if (this.consume('values').tok !== ')')
      throw new ParseError(`found '${literal}', expected: ')'`);
    return values;
  }

  private parseIdentifiersList(): string[] {
    const values: string[] = [];
    for (;;) {
      const { tok, literal } = this.consume('values');
      if (tok === 'id') {
        values.push(literal);
        const next = this.lookahead('values');
        if (next.tok === ',') continue;
        if (next.tok === ')') return values;
        throw new ParseError(`found '${next.literal}', expected: ',' or ')'`);
      }
      if (tok === ',') {
        if (values.length === 0) values.push(''); // "(,"
        const next = this.lookahead('values').tok;
        if (next === ')') {
          values.push(''); // ",)"
          return values;
        }
        if (next === ',') values.push(''); // ",,"
        continue;
      }
      throw new ParseError(`found '${literal}', expected: ',', or identifier`);
    }
  }

  private parseExactValue(): string[] {
    const next = this.lookahead('values').tok;
    if (next === 'eos' || next === ',') return [''];
    const { tok, literal } = this.consume('values');
    if (tok === 'id') return [literal];
    throw new ParseError(`found '${literal}', expected: identifier`);
  }
}

/** Requirement.Matches. */
function matches(req: Requirement, value: string | undefined): boolean {
  switch (req.op) {
    case 'in':
    case '=':
    case '==':
      return value !== undefined && req.values.includes(value);
    case 'notin':
    case '!=':
      return value === undefined || !req.values.includes(value);
    case 'exists':
      return value !== undefined;
    case '!':
      return value === undefined;
    case 'gt':
    case 'lt': {
      const have = value === undefined ? undefined : parseInt64(value);
      const want = parseInt64(req.values[0] ?? '');
      if (have === undefined || want === undefined) return false;
      return req.op === 'gt' ? have > want : have < want;
    }
  }
}

/** labels.Parse; a malformed selector is 400 BadRequest with Parse's error text. */
export function parseLabelSelector(text: string | null): Selector {
  if (!text) return () => true;
  let reqs: Requirement[];
  try {
    reqs = new Parser(text).parse();
  } catch (e) {
    if (e instanceof ParseError) throw badRequest(e.message);
    throw e;
  }
  return (obj) => reqs.every((r) => matches(r, obj.metadata.labels?.[r.key]));
}

// ------------------------------------------------------------ fields.ParseSelector

function fieldValue(obj: KubeObject, path: string): string | undefined {
  let cur: unknown = obj;
  for (const part of path.split('.')) {
    if (typeof cur !== 'object' || cur === null) return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  if (cur === undefined || cur === null) return undefined;
  return typeof cur === 'string' ? cur : JSON.stringify(cur);
}

/** fields splitTerms: split on commas not escaped with a backslash (kept in the term). */
function splitFieldTerms(selector: string): string[] {
  if (selector === '') return [];
  const terms: string[] = [];
  let start = 0;
  let inSlash = false;
  for (let i = 0; i < selector.length; i++) {
    const c = selector[i];
    if (inSlash) inSlash = false;
    else if (c === '\\') inSlash = true;
    else if (c === ',') {
      terms.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  terms.push(selector.slice(start));
  return terms;
}

/** fields splitTerm: the first `!=`, `==` or `=` splits (no trimming, no escapes on the left). */
function splitFieldTerm(term: string): { lhs: string; op: string; rhs: string } | undefined {
  for (let i = 0; i < term.length; i++) {
    for (const op of ['!=', '==', '=']) {
      if (term.startsWith(op, i))
        return { lhs: term.slice(0, i), op, rhs: term.slice(i + op.length) };
    }
  }
  return undefined;
}

/** fields UnescapeValue: `\\`, `\,`, `\=` only; a bare `,` or `=` is an error. */
function unescapeFieldValue(s: string): string {
  if (!/[\\,=]/.test(s)) return s;
  let out = '';
  let inSlash = false;
  for (const c of s) {
    if (inSlash) {
      if (c !== '\\' && c !== ',' && c !== '=')
        throw badRequest(`invalid field selector: invalid escape sequence: \\${c}`);
      out += c;
      inSlash = false;
    } else if (c === '\\') inSlash = true;
    else if (c === ',' || c === '=')
      // UnescapedRune's %v prints the rune as its code point.
      throw badRequest(`invalid field selector: unescaped character in value: ${c.codePointAt(0)}`);
    else out += c;
  }
  if (inSlash) throw badRequest('invalid field selector: invalid escape sequence: \\');
  return out;
}

/** One term of a parsed field selector. */
export interface FieldRequirement {
  field: string;
  negate: boolean;
  value: string;
}

/**
 * fields.ParseSelector (terms sorted, empty ones skipped): its 400s come while the
 * query is decoded (meta internalversion Convert_v1_ListOptions_To_internalversion_ListOptions),
 * before ValidateListOptions.
 */
export function parseFieldSelector(text: string | null): FieldRequirement[] {
  if (!text) return [];
  const terms = splitFieldTerms(text)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    .filter((t) => t !== '');
  return terms.map((term) => {
    const split = splitFieldTerm(term);
    if (!split) throw badRequest(`invalid selector: '${text}'; can't understand '${term}'`);
    return { field: split.lhs, negate: split.op === '!=', value: unescapeFieldValue(split.rhs) };
  });
}

/**
 * The resource's ConvertFieldLabel over a parsed selector (ListResource's
 * FieldSelector.Transform, after ValidateListOptions): anything but `allowed` → 400
 * `field label not supported: <label>` (apiextensions-apiserver
 * pkg/apiserver/conversion/converter.go crConverter ConvertFieldLabel, whose wording
 * core types' conversions share).
 */
export function fieldSelector(reqs: FieldRequirement[], allowed: string[]): Selector {
  for (const r of reqs) {
    if (!allowed.includes(r.field)) throw badRequest(`field label not supported: ${r.field}`);
  }
  return (obj) => reqs.every((r) => (fieldValue(obj, r.field) === r.value) !== r.negate);
}
