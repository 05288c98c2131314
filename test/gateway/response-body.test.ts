// Workflow-produced bodies in the configured content type (runtime/gateway/response-body.ts):
// XML that an XML parser reads back, HTML and text with everything escaped, and the
// JSON and unknown-type cases as before. The HTTP side is in response-modes.test.ts.
import fc from 'fast-check';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { describe, expect, it } from 'vitest';
import { bodyFormatOf, renderBody, xmlName } from '../../runtime/gateway/response-body.ts';

const parse = (xml: string) => new XMLParser({ parseTagValue: false }).parse(xml) as unknown;

describe('the format a content type selects', () => {
  it.each([
    ['application/json', 'json'],
    ['application/problem+json; charset=utf-8', 'json'],
    ['application/xml', 'xml'],
    ['text/xml; charset=utf-8', 'xml'],
    ['application/atom+xml', 'xml'],
    ['TEXT/HTML', 'html'],
    ['text/plain', 'text'],
    ['text/csv', 'text'],
    ['application/octet-stream', 'other'],
  ])('%s is %s', (type, format) => {
    expect(bodyFormatOf(type)).toBe(format);
  });
});

describe('XML bodies', () => {
  it('an object is a document with root <response>, arrays repeat their element', () => {
    const xml = renderBody('application/xml', {
      order: { id: 7, items: ['a', 'b'], paid: true, note: null },
    });
    expect(xml).toBe(
      '<?xml version="1.0" encoding="UTF-8"?>\n' +
        '<response><order><id>7</id><items>a</items><items>b</items><paid>true</paid><note/></order></response>',
    );
    expect(parse(xml)).toEqual({
      '?xml': '',
      response: { order: { id: '7', items: ['a', 'b'], paid: 'true', note: '' } },
    });
  });

  it('a top-level array and arrays inside arrays are <item> elements', () => {
    expect(renderBody('text/xml', [1, [2, 3]])).toBe(
      '<?xml version="1.0" encoding="UTF-8"?>\n<response><item>1</item><item><item>2</item><item>3</item></item></response>',
    );
  });

  it('a string is sent as it is: the workflow wrote the XML', () => {
    expect(renderBody('application/xml', '<ok/>')).toBe('<ok/>');
  });

  it('names an element cannot have are escaped as _xHHHH_, text is escaped', () => {
    expect(xmlName('1st')).toBe('_x0031_st');
    expect(xmlName('a b')).toBe('a_x0020_b');
    expect(xmlName('ns:tag')).toBe('ns_x003A_tag');
    expect(xmlName('#text')).toBe('_x0023_text');
    expect(xmlName('@_attr')).toBe('_x0040__attr');
    expect(xmlName('_x0041_')).toBe('_x005F_x0041_');
    expect(xmlName('')).toBe('_x0000_');
    expect(xmlName('café-1.x')).toBe('café-1.x');
    const xml = renderBody('application/xml', { '<b>': '</response><evil/>&', ctl: 'a\u0001b' });
    expect(XMLValidator.validate(xml)).toBe(true);
    expect(parse(xml)).toEqual({
      '?xml': '',
      response: { _x003C_b_x003E_: '</response><evil/>&', ctl: 'a\uFFFDb' },
    });
  });

  it('a __proto__ key from a JSON body is an element like any other, not lost', () => {
    const value = JSON.parse('{"__proto__":{"x":1},"a":1}') as unknown;
    const xml = renderBody('application/xml', value);
    expect(xml).toContain('<x>1</x>');
    expect(xml).toContain('<a>1</a>');
  });

  it('any JSON value renders as well-formed XML', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        if (typeof value === 'string') return;
        expect(XMLValidator.validate(renderBody('application/xml', value))).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});

describe('HTML bodies', () => {
  it('an object is an escaped definition list, arrays ordered lists', () => {
    expect(renderBody('text/html', { name: '<script>x</script>', tags: ['a&b'], n: null })).toBe(
      '<dl><dt>name</dt><dd>&lt;script&gt;x&lt;/script&gt;</dd><dt>tags</dt><dd><ol><li>a&amp;b</li></ol></dd><dt>n</dt><dd></dd></dl>',
    );
  });

  it('a string is sent as it is, a number as text', () => {
    expect(renderBody('text/html', '<p>hi</p>')).toBe('<p>hi</p>');
    expect(renderBody('text/html', 5)).toBe('5');
  });
});

describe('text bodies', () => {
  it('an object is key: value lines, nested values indented, arrays as - items', () => {
    expect(
      renderBody('text/plain', { n: 5, done: true, who: { name: 'a' }, tags: ['x', { y: 1 }] }),
    ).toBe('n: 5\ndone: true\nwho:\n  name: a\ntags:\n  - x\n  -\n    y: 1\n');
  });

  it('strings are sent as they are, multi-line values keep their indent, null is empty', () => {
    expect(renderBody('text/plain', 'plain')).toBe('plain');
    expect(renderBody('text/plain', { note: 'a\nb', none: null })).toBe('note: a\n  b\nnone:\n');
    expect(renderBody('text/plain', null)).toBe('');
  });
});

describe('JSON and other types', () => {
  it('JSON types get JSON text, strings included', () => {
    expect(renderBody('application/json', 'x')).toBe('"x"');
    expect(renderBody('application/json', undefined)).toBe('null');
  });

  it('an unknown type gets a string as-is, anything else as JSON text', () => {
    expect(renderBody('application/octet-stream', 'raw')).toBe('raw');
    expect(renderBody('application/x-custom', { a: 1 })).toBe('{"a":1}');
  });
});
