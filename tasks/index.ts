export * from './families';
export * from './schema';
export * from './errors';
export * from './loader';
export { taskPageHtml } from './pages';
