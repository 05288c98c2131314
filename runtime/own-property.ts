// Setting a key that came from outside (a JSON body, a form, a query string) on a plain
// object: `obj[key] = v` with the key `__proto__` sets the object's prototype instead
// of a property, and the key is silently lost (or, worse, the object takes another
// object's properties). Defined as an own property, it is just a key like any other.

/** Sets `key` on `target` as an own, enumerable property, whatever its name. */
export function setOwn<T>(target: Record<string, T>, key: string, value: T): void {
  Object.defineProperty(target, key, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}
