/**
 * The newest-wins pacer behind progress relays, BullMQ progress frames and task status lines:
 * the first update goes out at once, a burst inside the gap collapses to its newest value at the
 * gap's end, and nothing goes out after stop(). Fake timers: the pacing is the behaviour here.
 */
import { latestWins } from '../../shared/latest-wins';

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

test("the first update is sent at once; a burst inside the gap becomes its newest value, at the gap's end", () => {
  const sent: string[] = [];
  const pacer = latestWins((v: string) => sent.push(v), 250);
  pacer.push('line 1');
  expect(sent).toEqual(['line 1']);
  pacer.push('line 2');
  pacer.push('line 3');
  jest.advanceTimersByTime(249);
  expect(sent).toEqual(['line 1']);
  jest.advanceTimersByTime(1);
  expect(sent).toEqual(['line 1', 'line 3']);
  // Quiet for a whole gap: the next update goes out at once again.
  jest.advanceTimersByTime(1000);
  pacer.push('line 4');
  expect(sent).toEqual(['line 1', 'line 3', 'line 4']);
});

test('nothing is sent after stop(), not even an update held for the gap', () => {
  const sent: string[] = [];
  const pacer = latestWins((v: string) => sent.push(v), 250);
  pacer.push('a');
  pacer.push('held');
  pacer.stop();
  jest.advanceTimersByTime(1000);
  pacer.push('late');
  expect(sent).toEqual(['a']);
});
