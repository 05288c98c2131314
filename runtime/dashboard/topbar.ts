// The top bar is written once (public/topbar.html) and put into every page when the
// pages are read: a page says where it goes, which link is current, and which controls
// of its own it adds:
//   <header class="topbar" data-current="/dashboard">…the page's controls…</header>

const PAGE_HEADER = /^[ \t]*<header class="topbar" data-current="([^"]+)">([\s\S]*?)<\/header>\n?/m;
const CONTROLS = '<!-- page controls -->';

/** `page` with its topbar placeholder replaced by `partial`; throws if either lacks its mark. */
export function withTopbar(page: string, partial: string): string {
  const match = PAGE_HEADER.exec(page);
  if (!match) throw new Error('page has no <header class="topbar" data-current="…">');
  const [placeholder, current, controls] = match as unknown as [string, string, string];
  const link = `<a href="${current}">`;
  if (!partial.includes(link) || !partial.includes(CONTROLS))
    throw new Error(`topbar has no link to ${current} or no place for page controls`);
  const bar = partial
    .replace(/^<!--[\s\S]*?-->\n/, '')
    .replace(link, `<a href="${current}" aria-current="page">`)
    .replace(CONTROLS, controls.trim());
  return page.replace(placeholder, bar);
}
