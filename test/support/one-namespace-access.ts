// An admin authenticator for listing tests: alice may `get` webhooktriggers in team-a,
// nothing else; every SubjectAccessReview asked is counted.
import type {
  AdminAuthenticator,
  AdminUser,
  ResourceAttributes,
} from '../../runtime/admin/access.ts';

export class OneNamespace implements AdminAuthenticator {
  reviews: ResourceAttributes[] = [];
  authenticate(token: string): Promise<AdminUser | undefined> {
    return Promise.resolve(token === 'alice' ? { username: 'alice', groups: [] } : undefined);
  }
  authorize(_user: AdminUser, attributes: ResourceAttributes): Promise<boolean> {
    this.reviews.push(attributes);
    return Promise.resolve(attributes.verb === 'get' && attributes.namespace === 'team-a');
  }
}
