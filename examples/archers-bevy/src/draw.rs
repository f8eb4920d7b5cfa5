//! The window: every living archer as a square in its army's colour, every arrow in flight
//! as a streak moving from archer to target (interpolated between turns with
//! [`TurnProgress`]), and a line of text with the turn, the armies' sizes and the state hash.

use archers::world::{MAP_SIZE, TICKS_PER_TURN};
use bevy::prelude::*;
use phalanx_bevy::{StateHash, TurnProgress};

use crate::battle::Battle;

/// The window's side, pixels.
pub const WINDOW: f32 = 900.0;
const MARGIN: f32 = 60.0;
const ARCHER_PX: f32 = 3.0;
/// The pixels one archer covers on screen.
pub const ARCHER_PIXELS: usize = (ARCHER_PX * ARCHER_PX) as usize;

/// Army `army`'s colour: eight hues around the wheel.
pub fn army_colour(army: u8) -> Color {
    Color::hsl(f32::from(army % 8) * 45.0, 0.85, 0.55)
}

/// Where a point of the map is drawn (the map's centre at the window's).
fn screen(x: i32, y: i32) -> Vec2 {
    let scale = (WINDOW - 2.0 * MARGIN) / MAP_SIZE as f32;
    let half = MAP_SIZE as f32 / 2.0;
    Vec2::new((x as f32 - half) * scale, (half - y as f32) * scale - MARGIN / 3.0)
}

/// One sprite per archer, reused as archers fall.
#[derive(Component)]
struct Archer;

/// The status line.
#[derive(Component)]
struct Status;

/// Drawing for the window app.
pub struct DrawPlugin {
    /// Archers in all (the sprites to make).
    pub units: usize,
}

impl Plugin for DrawPlugin {
    fn build(&self, app: &mut App) {
        let units = self.units;
        app.insert_resource(ClearColor(Color::srgb(0.09, 0.11, 0.08)))
            .add_systems(Startup, move |commands: Commands| setup(commands, units))
            .add_systems(Update, (archers, arrows, status));
    }
}

fn setup(mut commands: Commands, units: usize) {
    commands.spawn(Camera2d);
    let field = screen(MAP_SIZE, 0) - screen(0, MAP_SIZE);
    let centre = (screen(0, 0) + screen(MAP_SIZE, MAP_SIZE)) / 2.0;
    commands.spawn((
        Sprite::from_color(Color::srgb(0.16, 0.2, 0.13), field.abs()),
        Transform::from_translation(centre.extend(-1.0)),
    ));
    for _ in 0..units {
        commands.spawn((
            Archer,
            Sprite::from_color(Color::WHITE, Vec2::splat(ARCHER_PX)),
            Transform::default(),
            Visibility::Hidden,
        ));
    }
    commands.spawn((
        Status,
        Text2d::new("waiting for the players"),
        TextFont { font_size: FontSize::Px(16.0), ..default() },
        Transform::from_xyz(0.0, WINDOW / 2.0 - 30.0, 1.0),
    ));
}

fn archers(
    battle: Res<Battle>,
    mut sprites: Query<(&mut Sprite, &mut Transform, &mut Visibility), With<Archer>>,
) {
    let mut living = battle.0.living();
    for (mut sprite, mut transform, mut visibility) in &mut sprites {
        match living.next() {
            Some((army, x, y)) => {
                sprite.color = army_colour(army);
                transform.translation = screen(x, y).extend(0.0);
                *visibility = Visibility::Visible;
            }
            None => *visibility = Visibility::Hidden,
        }
    }
}

fn arrows(battle: Res<Battle>, progress: Res<TurnProgress>, mut gizmos: Gizmos) {
    // The battle stands at the end of the last turn; the next turn's ticks are under way.
    let now = battle.0.ticks() as f32 + progress.alpha * TICKS_PER_TURN as f32;
    for arrow in battle.0.arrows() {
        let flight = (arrow.lands_at - arrow.shot_at).max(1) as f32;
        let done = ((now - arrow.shot_at as f32) / flight).clamp(0.0, 1.0);
        let (from, to) = (screen(arrow.from.0, arrow.from.1), screen(arrow.to.0, arrow.to.1));
        let head = from.lerp(to, done);
        let tail = from.lerp(to, (done - 0.35).max(0.0));
        gizmos.line_2d(tail, head, army_colour(arrow.army).lighter(0.3));
    }
}

fn status(battle: Res<Battle>, hash: Res<StateHash>, mut text: Query<&mut Text2d, With<Status>>) {
    // The battle changes only when a turn executes: the line is built once a turn.
    let Some(turn) = hash.turn.filter(|_| hash.is_changed()) else { return };
    let mut armies = [0u32; 8];
    for (army, ..) in battle.0.living() {
        armies[usize::from(army % 8)] += 1;
    }
    let sizes: Vec<String> = armies.iter().map(u32::to_string).collect();
    let line = format!(
        "turn {}   state hash {:016x}\narchers by army {}   arrows in flight {}",
        turn.0,
        hash.hash,
        sizes.join(" "),
        battle.0.arrows().len(),
    );
    for mut text in &mut text {
        if text.0 != line {
            text.0 = line.clone();
        }
    }
}

/// Pixels of each army's colour in a picture of the window (the screenshot's check that every
/// army is on screen); `None` if the picture cannot be read.
pub fn army_pixels(picture: &Image) -> Option<[usize; 8]> {
    let picture = picture.clone().try_into_dynamic().ok()?.to_rgb8();
    let colours: Vec<[u8; 4]> =
        (0..8).map(|army| army_colour(army).to_srgba().to_u8_array()).collect();
    let mut counts = [0; 8];
    for pixel in picture.pixels() {
        let near = |colour: &[u8; 4]| {
            pixel.0.iter().zip(colour).map(|(a, b)| u32::from(a.abs_diff(*b))).sum::<u32>() <= 24
        };
        if let Some(army) = colours.iter().position(near) {
            counts[army] += 1;
        }
    }
    Some(counts)
}
